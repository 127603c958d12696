"""How much the heavier tests do: a moderate amount by default and in CI, all of it in a
long run (``HYPOTHESIS_PROFILE=long``, which also draws thirty times the examples).

Moderate sizes keep what a test proves and sample where it repeats itself: a crash test
still stops the worker at every distinct commit boundary, but at every n-th repeat of one
rather than at all of them; a job's clock moves through hours rather than a day.
"""

from __future__ import annotations

import os

LONG_RUN = os.environ.get("HYPOTHESIS_PROFILE") in ("long", "thorough")


def sized(moderate: int, long: int) -> int:
    """``long`` in a long run, ``moderate`` otherwise."""
    return long if LONG_RUN else moderate
