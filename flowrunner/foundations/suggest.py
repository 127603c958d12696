"""The name a person probably meant: ``did you mean 'status'?`` after a near miss.

One rule for every sentence that names an unknown column, kind, event, audience, job or
channel: the closest known name by ``difflib``'s ratio (at least 0.6), case a small
difference. Pure.

>>> did_you_mean("requestor", ["requester", "buyer"])
" — did you mean 'requester'?"
>>> did_you_mean("Status", ["status"]), did_you_mean("zzz", ["status"])
(" — did you mean 'status'?", '')
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, known: Iterable[str], *, joint: str = " — ") -> str:
    """``joint`` and ``did you mean 'x'?`` naming the known name closest to ``name``, or ``""``.

    Case counts as a small difference: ``Requester`` suggests ``requester``.
    """
    candidates = {k.casefold(): k for k in known}
    close = difflib.get_close_matches(name.strip().casefold(), list(candidates), n=1, cutoff=0.6)
    if not close or candidates[close[0]] == name:
        return ""
    return f"{joint}did you mean '{candidates[close[0]]}'?"
