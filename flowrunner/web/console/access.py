"""Who reads the console, and what they may read, edit and do.

The application decides: it gives the console a function from the request to a
``Principal`` (its logged-in user) and, if it likes, three hooks. Without that function
the console admits only a bearer token (``flowrunner console --token``), compared in
constant time: sent as ``Authorization: Bearer …``, or typed once into the console's
sign-in page (a POST), which keeps an HttpOnly, SameSite=Strict cookie derived from it.
The token is never taken from an address: logs, proxies and browser history keep those.

By default every reader may read every step, a reader with the role ``editor`` may edit
flows, and one with the role ``operator`` may start, cancel, retry, redrive and restart
runs. The token's reader has both roles.

On a runner that declares roles (``Role(..., operations=[...])``), the Operations room
shows a reader only the areas their roles open — ``workflows`` (runs of flows, code
workflows and timers), ``jobs``, ``deliveries`` (the notices outbox) — and they act on
what they see there (the application's ``can_operate``, if it gives one, decides too).
A reader's roles are those the application's ``Principal`` gives, with those of the
declared principal of the same name; the token's reader sees every area.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request

from flowrunner import errors
from flowrunner.authority import grants
from flowrunner.store import listing
from flowrunner.store import operations as ops

ACTIONS = ("start", "cancel", "retry", "redrive", "restart")
"""What an operator does to runs: the ``action`` ``can_operate`` is asked about."""
JOB_ACTIONS = ("pause", "resume")
"""What an operator does to a job at times (the Jobs page): in the ``jobs`` area."""

TOKEN_COOKIE = "flowrunner_console"
TOKEN_VARIABLE = "FLOWRUNNER_CONSOLE_TOKEN"


@dataclasses.dataclass(frozen=True)
class Principal:
    """The console's reader: a name (journaled with every action), the tenant whose rows
    they see (on a tenant binding), and roles the default hooks read."""

    name: str
    tenant: str | None = None
    roles: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("a principal needs a name: the journal names who acted")
        object.__setattr__(self, "roles", frozenset(self.roles))


PrincipalOf = Callable[[Request], "Principal | Awaitable[Principal | None] | None"]
CanRead = Callable[[Principal, Mapping[str, Any]], bool]
CanEdit = Callable[[Principal, Mapping[str, Any]], bool]
CanOperate = Callable[[Principal, str, "ops.RunRow | None"], bool]


def read_everything(principal: Principal, step_row: Mapping[str, Any]) -> bool:
    """The default ``can_read``: every step."""
    return True


def editors_edit(principal: Principal, flow_row: Mapping[str, Any]) -> bool:
    """The default ``can_edit``: a reader with the role ``editor``."""
    return "editor" in principal.roles


def operators_operate(principal: Principal, action: str, run: ops.RunRow | None) -> bool:
    """The default ``can_operate``: a reader with the role ``operator``."""
    return "operator" in principal.roles


class Refused(Exception):
    """The request has no reader the console admits (401) or one it refuses (403)."""

    def __init__(self, message: str, status_code: int = 401) -> None:
        super().__init__(message)
        self.status_code = status_code


@dataclasses.dataclass(frozen=True)
class Access:
    """The application's answers: who reads, and the three hooks."""

    principal: PrincipalOf | None = None
    token: str | None = None
    operator: str = "console"
    """The token reader's name, journaled with what they do."""
    tenant: str | None = None
    """The token reader's tenant, on a tenant binding."""
    can_read: CanRead = read_everything
    can_edit: CanEdit = editors_edit
    can_operate: CanOperate = operators_operate
    authority: grants.Authority | None = None
    """The runner's declared roles and principals: their ``operations`` open areas."""

    def __post_init__(self) -> None:
        if self.principal is None and not self.token:
            raise errors.BindingError(
                "the console must know who reads it: give principal= (a function from the "
                "request to a Principal) or a bearer token (token=, or --token)"
            )
        if self.principal is not None and self.token:
            raise errors.BindingError(
                "give the console principal= or token=, not both: the application's "
                "function decides who reads"
            )

    async def reader(self, request: Request) -> Principal:
        """The request's principal; ``Refused`` when there is none."""
        if self.principal is None:
            if not self.token_in(request):
                raise Refused(
                    "this console needs its token: sign in with it below, or send "
                    "Authorization: Bearer …"
                )
            return Principal(
                self.operator, tenant=self.tenant, roles=frozenset({"editor", "operator"})
            )
        found = self.principal(request)
        if inspect.isawaitable(found):
            found = await found
        if found is None:
            raise Refused("the application does not know who you are: log in first")
        if not isinstance(found, Principal):
            raise TypeError(
                f"the console's principal function returned a {type(found).__name__}, "
                "not a Principal"
            )
        return found

    # -- the token ---------------------------------------------------------------------

    def token_in(self, request: Request) -> bool:
        """Whether the request carries the token: as a bearer, or the signed-in cookie
        (never in the address)."""
        assert self.token is not None
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and _same(given.strip(), self.token):
            return True
        return _same(request.cookies.get(TOKEN_COOKIE, ""), self.cookie_value())

    def is_token(self, given: str) -> bool:
        """Whether ``given`` (typed into the sign-in page) is the token."""
        return self.token is not None and _same(given.strip(), self.token)

    def cookie_value(self) -> str:
        """What the cookie holds: derived from the token, never the token itself."""
        assert self.token is not None
        return hmac.new(
            self.token.encode(), b"flowrunner console session", hashlib.sha256
        ).hexdigest()

    # -- the hooks, as the pages ask them ------------------------------------------------

    def reads(self, reader: Principal) -> Callable[[Mapping[str, Any]], bool]:
        """``can_read`` for one reader, as the diagrams take it (step row -> bool)."""
        return lambda step_row: bool(self.can_read(reader, step_row))

    def reads_column(self, reader: Principal, resource: str, column: str) -> bool:
        """Whether ``reader`` may read a record's ``column`` on its page: ``can_read``
        asked with ``{"resource": resource, "column": column}`` instead of a step row."""
        return bool(self.can_read(reader, {"resource": resource, "column": column}))

    def may_edit(self, reader: Principal, flow_row: Mapping[str, Any]) -> bool:
        return bool(self.can_edit(reader, flow_row))

    def may(self, reader: Principal, action: str, run: ops.RunRow | None) -> bool:
        if self.authority is not None:
            of_a_job = run is not None and run.flow_id.startswith(listing.JOB_RUNS)
            area = "jobs" if action in JOB_ACTIONS or of_a_job else "workflows"
            if not self.sees(reader, area):
                return False
            if self.can_operate is operators_operate:
                return True  # the area's role is what lets them act there
        return bool(self.can_operate(reader, action, run))

    # -- the Operations room's areas -------------------------------------------------------

    def areas(self, reader: Principal) -> frozenset[str]:
        """The Operations room's areas ``reader`` sees and acts on: every one unless the
        runner declares roles; then those the reader's roles open."""
        if self.authority is None or self.token:
            return frozenset(grants.AREAS)
        held = set(reader.roles)
        declared = self.authority.principals.get(reader.name)
        if declared is not None:
            held.update(declared.roles)
        return self.authority.areas(held)

    def sees(self, reader: Principal, area: str) -> bool:
        return area in self.areas(reader)

    def run_areas(self, reader: Principal) -> frozenset[str] | None:
        """The areas whose runs the Runs room lists for ``reader`` (None: every run)."""
        if self.authority is None or self.token:
            return None
        return self.areas(reader) & {"workflows", "jobs"}


def _same(given: str, expected: str) -> bool:
    """Constant-time equality of two texts (an empty one never matches)."""
    if not given or not expected:
        return False
    return hmac.compare_digest(
        given.encode(errors="surrogatepass"), expected.encode(errors="surrogatepass")
    )
