"""Names as people write them: flowrunner's own words in any case, the binding's exactly.

flowrunner's own words — the built-in kinds, a flow's start, a mode's ``any`` and
``all`` — are read whatever their case and stored in one canonical spelling
(``WAITFOR`` is ``waitFor``, `` Created `` is ``created``, ``60 %`` is ``60%``). Names
the application's binding defines — its kinds, events and audiences, and the record's
columns — are exact; a near miss is told the name it probably meant. A flow's name is
unique whatever its case.

>>> canonical_kind(" WAITFOR "), canonical_start("Manual"), canonical_mode(" All ")
('waitFor', 'manual', 'all')
>>> did_you_mean("requestor", ["requester", "buyer"])
" — did you mean 'requester'?"
"""

from __future__ import annotations

from flowrunner import binding as binding_mod
from flowrunner.foundations import modes
from flowrunner.foundations.suggest import did_you_mean as did_you_mean  # kept here too

STARTS = ("created", "updated", "manual", "schedule")

_BUILTIN = {kind.casefold(): kind for kind in binding_mod.BUILTIN_KINDS}
_STARTS = {start.casefold(): start for start in STARTS}


def canonical_kind(kind: str | None) -> binding_mod.StepKind | None:
    """A built-in kind in its one spelling (``WaitFor`` → ``waitFor``); others as written.

    An application's kinds are the binding's names and stay exact.
    """
    if kind is None:
        return None
    return _BUILTIN.get(kind.strip().casefold(), kind.strip())


def canonical_start(start: str | None) -> str | None:
    """A flow's start (``created``, ``updated``, ``manual``, ``schedule``) in lower case
    when it is one; else as written."""
    if start is None:
        return None
    return _STARTS.get(start.strip().casefold(), start.strip())


def canonical_mode(mode: str | None) -> str | None:
    """A mode as ``modes`` prints it (``ALL`` → ``all``, ``60 %`` → ``60%``); else as written.

    A mode that cannot be read is left as written, for validation to refuse.
    """
    if mode is None:
        return None
    try:
        return str(modes.parse(mode))
    except ValueError:
        return mode.strip()


def name_key(name: object) -> str | None:
    """What makes two flow names the same: ``Big orders`` and `` big ORDERS `` are one."""
    if name is None:
        return None
    text = str(name).strip()
    return text.casefold() if text else None
