"""An inbound endpoint, declared: a signed callback an outside system sends, and what it runs.

::

    Inbound(
        name="payment_settled",
        verify=Hmac(secret_env="PAYMENT_CALLBACK_SECRET", header="x-processor-signature",
                    timestamp_header="x-processor-timestamp", window="5 minutes"),
        run_as="payment-processor",
        command="settle_payment",
        key=lambda body: body["id"],
        input=lambda body: {"order": body["order"], "amount": body["amount"]},
        emit="po.paid",
        payload=lambda body: {"order": body["order"], "paid": body["amount"]},
    )

A runner takes its inbounds when it is mounted (``flow_runner(..., inbound=[...])``),
which checks them against its binding and commands (``check``). ``read`` turns a
verified body into a ``Delivery`` — its key, tenant, the command's input, the event to
emit — before anything is written. Receiving one (the signature, the transaction):
``flowrunner.inbound.receipt``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import NoReturn, Protocol

from flowrunner import binding as binding_mod
from flowrunner import errors
from flowrunner.engine import commands as commands_mod
from flowrunner.foundations import payloads, sanitize, shapes
from flowrunner.inbound import signing

# A function of the parsed body (JSON: a dict, a list, a text, a number...).
BodyFunction = Callable[[shapes.Json], object]

# A name is the last segment of the endpoint's path: POST .../inbound/payment_settled.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
# A sender's delivery id: printable text, this long at most.
MAX_KEY = 200


@dataclass(frozen=True, kw_only=True)
class Inbound:
    """A signed endpoint, ``POST …/inbound/NAME``, that runs a command and may emit an event.

    ``verify`` (an ``Hmac``) says how the sender signs; the signature is the credential.
    ``key(body)`` is the sender's own id of the delivery: the same bytes sent again under
    it replay the first answer, and other bytes under it are refused (409). ``command``
    names one of the runner's commands, run as the principal ``run_as`` (authorized as
    the runner's commands are) with ``input(body)`` as its inputs (default: the body).
    ``emit`` names one of the binding's events, whose payload is ``payload(body)``
    (default: the body; None emits nothing for this body): a waiting flow's answer. An
    inbound runs a command, emits an event, or both. On a tenant binding ``tenant(body)``
    names the delivery's tenant: the command runs in it and the event goes to its record.

    Made with a sentence (``BindingError``) when it cannot work.
    """

    name: str
    verify: signing.Hmac
    run_as: str
    key: BodyFunction
    command: str | None = None
    input: BodyFunction | None = None
    emit: str | None = None
    payload: BodyFunction | None = None
    tenant: BodyFunction | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise errors.BindingError(
                f"Inbound: name {self.name!r} must be letters, digits, '_', '.' and '-' "
                "(it ends the endpoint's path)"
            )
        where = f"Inbound {self.name!r}"
        if not isinstance(self.verify, signing.Hmac):
            raise errors.BindingError(f"{where}: verify is an Hmac(...) saying how it is signed")
        if (
            not isinstance(self.run_as, str)
            or not self.run_as.strip()
            or payloads.text_problem(self.run_as) is not None
        ):
            raise errors.BindingError(f"{where}: run_as names the principal it runs as")
        for field in ("key", "input", "payload", "tenant"):
            function = getattr(self, field)
            if (function is not None or field == "key") and not callable(function):
                raise errors.BindingError(f"{where}: {field} is a function of the body")
        if self.command is None and self.emit is None:
            raise errors.BindingError(f"{where}: it runs a command, emits an event, or both")
        for field in ("command", "emit"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise errors.BindingError(f"{where}: {field} is a name")
        if self.payload is not None and self.emit is None:
            raise errors.BindingError(
                f"{where}: payload needs emit, the event it is the payload of"
            )
        if self.input is not None and self.command is None:
            raise errors.BindingError(f"{where}: input needs command, which it is the input of")


@dataclass(frozen=True)
class Delivery:
    """What one verified callback asks for, read before anything is written."""

    key: str
    """The sender's delivery id, as text."""
    tenant: object
    """What ``tenant(body)`` named (None without tenants)."""
    inputs: shapes.Payload
    """The command's inputs (empty without a command)."""
    event: shapes.Payload | None
    """The payload of the event to emit, or None."""
    fingerprint: str
    """The body's SHA-256, as a receipt keeps it: the same bytes, the same fingerprint."""


def check(
    inbounds: Iterable[Inbound],
    *,
    binding: binding_mod.FlowBinding,
    commands: Mapping[str, commands_mod.Command],
    authorize: Callable[[str, str], bool] | None,
) -> dict[str, Inbound]:
    """The inbounds by name, each checked against the runner; else one ``BindingError``.

    Names are unique; a command is one of the runner's and its principal may run it; an
    event is one of the binding's; a tenant binding's inbound says ``tenant``, and only
    then.
    """
    found: dict[str, Inbound] = {}
    for inbound in inbounds:
        if not isinstance(inbound, Inbound):
            raise errors.BindingError(
                f"inbound takes Inbound(...) declarations, not a {type(inbound).__name__}"
            )
        where = f"inbound {inbound.name!r}"
        if inbound.name in found:
            raise errors.BindingError(f"{where} is declared twice")
        command = inbound.command
        if command is not None:
            commands_mod.check_mounted(
                command,
                principal=inbound.run_as,
                commands=commands,
                authorize=authorize,
                needed_by=where,
            )
        if inbound.emit is not None and inbound.emit not in binding.events:
            known = ", ".join(sorted(binding.events)) or "none"
            raise errors.BindingError(
                f"{where} emits {inbound.emit!r}, which is not one of the binding's events "
                f"(events: {known})"
            )
        if binding.tenant is not None and inbound.tenant is None:
            raise errors.BindingError(
                f"{where} needs tenant=, a function of the body naming its tenant: "
                f"{binding.resource} records belong to tenants"
            )
        if binding.tenant is None and inbound.tenant is not None:
            raise errors.BindingError(
                f"{where} names a tenant, but {binding.resource} records have none"
            )
        found[inbound.name] = inbound
    return found


class Signed(Protocol):
    """What is signed as a callback is: an inbound, or a mail inbound."""

    @property
    def name(self) -> str: ...

    @property
    def verify(self) -> signing.Hmac: ...


def unset_secrets(inbounds: Iterable[Signed], environ: Mapping[str, str]) -> str | None:
    """The one line saying which secret variables ``environ`` does not set, and which
    inbounds need them; None when each is set. Pure: the environment is given.

    >>> verify = signing.Hmac(secret_env="HOOK_KEY", header="x-signature")
    >>> hook = Inbound(name="hook", verify=verify, run_as="bot", key=str, emit="po.paid")
    >>> unset_secrets([hook], {})
    "inbound hook: the environment variable HOOK_KEY is not set: set it in the server's environment"
    >>> unset_secrets([hook], {"HOOK_KEY": "s3cret"}) is None
    True
    """
    unset = [inbound for inbound in inbounds if not environ.get(inbound.verify.secret_env)]
    if not unset:
        return None
    variables = sorted({inbound.verify.secret_env for inbound in unset})
    names = ", ".join(inbound.name for inbound in unset)
    if len(variables) == 1:
        said = f"the environment variable {variables[0]} is not set: set it"
    else:
        said = f"the environment variables {', '.join(variables)} are not set: set them"
    return f"inbound {names}: {said} in the server's environment"


def read(inbound: Inbound, body: bytes) -> Delivery:
    """The delivery a verified body asks for; ``CallbackRejected`` (400) when it cannot be
    read: not JSON in UTF-8, JSON the store could not keep (``storable``), or one of the
    inbound's functions fails on it or gives what cannot be used. Pure: the functions run
    here, before any transaction."""
    parsed = storable(_json(body))
    key = _key(_call(inbound, "key", parsed))
    tenant: object = None
    if inbound.tenant is not None:
        tenant = _call(inbound, "tenant", parsed)
        if tenant is None:
            raise _unreadable("tenant(body) named no tenant")
    inputs: shapes.Payload = {}
    if inbound.command is not None:
        given = parsed if inbound.input is None else _call(inbound, "input", parsed)
        inputs = _mapping(given, "input(body)" if inbound.input else "the body (the input)")
    event = None
    if inbound.emit is not None:
        given = parsed if inbound.payload is None else _call(inbound, "payload", parsed)
        if given is not None:
            event = _mapping(
                given, "payload(body)" if inbound.payload else "the body (the payload)"
            )
    return Delivery(key, tenant, inputs, event, fingerprint(body))


def fingerprint(body: bytes) -> str:
    """The body's SHA-256 as a receipt keeps it (the ledger keeps results sanitized, and
    masking is the same for the same text, so the kept form is the one compared)."""
    kept = sanitize.sanitize_text("sha256:" + hashlib.sha256(body).hexdigest())
    return kept


def _json(body: bytes) -> shapes.Json:
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_not_json)
    except UnicodeDecodeError:
        raise _unreadable("the body is not UTF-8 text") from None
    except (ValueError, RecursionError) as exc:
        raise _unreadable(f"the body is not JSON ({type(exc).__name__})") from None


def storable(parsed: shapes.Json) -> shapes.Json:
    """A parsed body as it is, when the database could keep every part of it; else
    ``CallbackRejected`` (400) naming the first part it could not.

    Judged whole, at any depth, before a function or the command sees it, by the rule of
    an event's payload (``payloads.plain_json``): no text (a value or a name) holding
    ``\\u0000`` or a lone surrogate (``\\ud800`` is JSON, but not UTF-8), no whole number
    past 64 bits, no number past a float's range (``1e400``), nothing nested deeper than
    ``payloads.MAX_DEPTH``. A command given such a body would fail where it writes —
    a 503, sent again for ever — so it is a body that cannot be read: said once, 400.
    A name given twice in one object counts once, with its last value, as JSON is read.

    >>> storable({"id": "evt_1", "lines": [{"qty": 2}]})
    {'id': 'evt_1', 'lines': [{'qty': 2}]}
    >>> storable({"id": "evt_1", "note": ["a\\u0000"]})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    flowrunner.errors.CallbackRejected: the body's field 'note[0]' contains the character \\x00, ...
    """
    try:
        payloads.plain_json(parsed)
    except payloads.NotPlain as exc:
        where = f"the body's field {payloads.quote(exc.field, 80)}" if exc.field else "the body"
        raise _unreadable(f"{where} {exc.problem}") from None
    return parsed


def _not_json(constant: str) -> NoReturn:
    raise ValueError(f"{constant} is not JSON")


def _call(inbound: Inbound, field: str, parsed: shapes.Json) -> object:
    function: BodyFunction = getattr(inbound, field)
    try:
        return function(parsed)
    except Exception as exc:
        raise _unreadable(f"{field}(body) failed: {sanitize.describe_exception(exc)}") from None


def _key(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise _unreadable(f"key(body) gave a {type(value).__name__}, not a text or a number")
    if isinstance(value, int) and abs(value) >= 10**MAX_KEY:
        value = ""  # more digits than an id holds (and than str() may write)
    text = str(value).strip()
    if not text or len(text) > MAX_KEY or not text.isprintable():
        raise _unreadable(f"key(body) gave no printable id of {MAX_KEY} characters at most")
    return text


def _mapping(value: object, what: str) -> shapes.JsonDict:
    if not isinstance(value, Mapping):
        raise _unreadable(f"{what} is a {type(value).__name__}, not a mapping of fields")
    return {str(k): v for k, v in value.items()}


def _unreadable(reason: str) -> errors.CallbackRejected:
    return errors.CallbackRejected(reason)


__all__ = [
    "Delivery",
    "Inbound",
    "Signed",
    "check",
    "fingerprint",
    "read",
    "storable",
    "unset_secrets",
]
