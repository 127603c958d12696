"""Roles and principals as an application declares them once on its runner, and every
question asked of them: may this principal run this command, may it be a run-as
principal, which Operations room areas does a reader's role open. Pure: no I/O.

    roles = [Role("mailer", commands=["send_mail"], service=True),
             Role("ops", operations=["jobs", "workflows"])]
    principals = [Principal("service-bot", roles=["mailer"])]
    authority = Authority.declare(roles, principals)
    authority.refusal("service-bot", "request_approval")
    # 'request_approval is not granted to service-bot (roles: mailer)'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from flowrunner import errors
from flowrunner.foundations import payloads

EVERY = "*"
"""A role's command that grants every command: generic writes, refused to a run-as role."""

AREAS = ("workflows", "jobs", "deliveries")
"""The Operations room's areas a role's ``operations`` may name: runs of flows and code
workflows and timers; jobs and their runs; the notices outbox and signed deliveries."""


def _name(value: object, what: str) -> str:
    """``value`` as a name kept in text columns (who started a run), else BindingError."""
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        raise errors.BindingError(f"{what} is a name such as 'automation', not {value!r}")
    problem = payloads.text_problem(value)
    if problem is not None:
        raise errors.BindingError(f"{what} {value!r} {problem}")
    return value


def _names(values: object, what: str) -> tuple[str, ...]:
    if isinstance(values, str) or not isinstance(values, Sequence | frozenset | set):
        raise errors.BindingError(f"{what} is a list of names, not {values!r}")
    return tuple(dict.fromkeys(_name(value, what) for value in values))


@dataclasses.dataclass(frozen=True)
class Role:
    """A named set of grants: the ``commands`` its principals may run (``"*"``: every
    command), whether it is a ``service`` role (one a run-as principal may hold), and the
    Operations room's areas (``operations``: ``workflows``, ``jobs``, ``deliveries``) its
    readers see and act on in the console."""

    name: str
    commands: Sequence[str] = ()
    service: bool = False
    operations: Sequence[str] = ()

    def __post_init__(self) -> None:
        _name(self.name, "a role's name")
        where = f"role {self.name!r}"
        object.__setattr__(self, "commands", _names(self.commands, f"{where}: a command"))
        areas = _names(self.operations, f"{where}: an area")
        unknown = [area for area in areas if area not in AREAS]
        if unknown:
            raise errors.BindingError(
                f"{where} names the area {unknown[0]!r}, which the Operations room does not "
                f"have (areas: {', '.join(AREAS)})"
            )
        object.__setattr__(self, "operations", areas)
        if not isinstance(self.service, bool):
            raise errors.BindingError(f"{where}: service is True or False")

    @property
    def generic(self) -> bool:
        """Whether it grants every command (``"*"``)."""
        return EVERY in self.commands

    def grants(self, command: str) -> bool:
        return self.generic or command in self.commands


@dataclasses.dataclass(frozen=True)
class Principal:
    """Who a command runs as: a name (kept with every run it starts) and the names of
    the roles it holds."""

    name: str
    roles: Sequence[str] = ()

    def __post_init__(self) -> None:
        _name(self.name, "a principal's name")
        object.__setattr__(self, "roles", _names(self.roles, f"principal {self.name!r}: a role"))


@dataclasses.dataclass(frozen=True)
class Authority:
    """The declared roles and principals, checked together once (``declare``). Called as
    ``authority(principal, command)`` it is an ``authorize`` hook: whether the
    principal is granted the command."""

    roles: Mapping[str, Role]
    principals: Mapping[str, Principal]

    @classmethod
    def declare(cls, roles: Iterable[Role], principals: Iterable[Principal]) -> Authority:
        """The roles and principals checked together: names unique, every principal's
        role declared (``BindingError`` otherwise)."""
        by_role: dict[str, Role] = {}
        for role in roles:
            if not isinstance(role, Role):
                raise errors.BindingError(f"roles are Role(...), not {type(role).__name__}")
            if role.name in by_role:
                raise errors.BindingError(f"the role {role.name!r} is declared twice")
            by_role[role.name] = role
        by_name: dict[str, Principal] = {}
        for principal in principals:
            if not isinstance(principal, Principal):
                raise errors.BindingError(
                    f"principals are Principal(...), not {type(principal).__name__}"
                )
            if principal.name in by_name:
                raise errors.BindingError(f"the principal {principal.name!r} is declared twice")
            for held in principal.roles:
                if held not in by_role:
                    known = ", ".join(sorted(by_role)) or "none"
                    raise errors.BindingError(
                        f"principal {principal.name!r} holds the role {held!r}, which is not "
                        f"declared (roles: {known})"
                    )
            by_name[principal.name] = principal
        return cls(by_role, by_name)

    def __call__(self, principal: str, command: str) -> bool:
        return self.refusal(principal, command) is None

    def roles_of(self, principal: str) -> tuple[Role, ...]:
        found = self.principals.get(principal)
        return () if found is None else tuple(self.roles[name] for name in found.roles)

    def refusal(self, principal: str, command: str) -> str | None:
        """Why ``principal`` may not run ``command``, as a sentence; None when it may.

        >>> a = Authority.declare([Role("mailer", ["send_mail"], service=True)],
        ...                       [Principal("service-bot", ["mailer"])])
        >>> a.refusal("service-bot", "request_approval")
        'request_approval is not granted to service-bot (roles: mailer)'
        >>> a.refusal("service-bot", "send_mail") is None
        True
        """
        if principal not in self.principals:
            return f"{principal} is not a declared principal ({self._known()})"
        held = self.roles_of(principal)
        if any(role.grants(command) for role in held):
            return None
        names = ", ".join(role.name for role in held) or "none"
        return f"{command} is not granted to {principal} (roles: {names})"

    def run_as_problem(self, principal: str) -> str | None:
        """Why ``principal`` may not be what a part of the application runs as, as a
        sentence; None when it holds service roles alone, none granting every command."""
        if principal not in self.principals:
            return f"{principal} is not a declared principal ({self._known()})"
        held = self.roles_of(principal)
        if not held:
            return f"{principal} holds no role, so it may run no command"
        for role in held:
            if not role.service:
                return (
                    f"{principal} holds the role {role.name}, which is not a service role: "
                    "what runs unattended holds service roles alone (Role(..., service=True))"
                )
            if role.generic:
                return (
                    f"{principal} holds the role {role.name}, which grants every command "
                    "('*'): a run-as role names the commands it grants"
                )
        return None

    def first_granted(self, command: str) -> str | None:
        """The first declared principal that may run ``command`` and be run as (an
        ``at`` timer's, when its own and the runner's are not granted it)."""
        for name in self.principals:
            if self.run_as_problem(name) is None and self(name, command):
                return name
        return None

    def areas(self, roles: Iterable[str]) -> frozenset[str]:
        """The Operations room's areas the named roles open (an undeclared role opens
        none)."""
        return frozenset(
            area for name in roles if name in self.roles for area in self.roles[name].operations
        )

    def _known(self) -> str:
        return "principals: " + (", ".join(sorted(self.principals)) or "none")
