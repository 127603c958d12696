"""The one rule for an id a person or an address gives: a run's, a flow's, a step's, a
page's ``before`` cursor — a whole number from 1 to ``MAX_ID``, what a 64-bit signed
column holds, or a refusal saying so.

The console, the command line, the API and the runner's own methods read every such id
here, before anything reaches the database: a number no column can hold (``2**63``,
twenty nines) is refused with the same sentence everywhere, never handed to a driver
that overflows.
"""

from __future__ import annotations

import re

MAX_ID = 2**63 - 1
"""The largest id: a 64-bit signed integer's largest value."""

EXPECTED = f"a whole number from 1 to {MAX_ID}"
"""What an id is, as a refusal says it."""

# Digits as str(int) prints a positive number: ASCII only, no sign, no leading zero, no
# "_" (int() would take "+7", "0_7", "٧" and, in a str subclass, much else).
_DIGITS = re.compile(r"[1-9][0-9]*")


class NotAnId(ValueError):
    """``given`` is not an id. ``str()`` is the sentence; ``shown`` the value as quoted in
    it, ``what`` whose id it was to be."""

    def __init__(self, given: object, what: str) -> None:
        self.shown = shown(given)
        self.what = what
        super().__init__(f"{self.shown} is not {_a(what)}'s id: give {EXPECTED}")


def read(value: object, what: str = "row") -> int:
    """The id ``value`` names: an ``int`` (not a ``bool``) or its digits as text (blanks
    around them allowed) from 1 to ``MAX_ID``; else ``NotAnId``. ``what`` names whose id it
    is, for the sentence.

    >>> read("42"), read(7), read(" 9223372036854775807 ")
    (42, 7, 9223372036854775807)
    >>> for given in ("9223372036854775808", "0", "-3", "+3", "007", "٣", "1_000", True):
    ...     try:
    ...         read(given, "run")
    ...     except NotAnId as refused:
    ...         print(refused)
    '9223372036854775808' is not a run's id: give a whole number from 1 to 9223372036854775807
    '0' is not a run's id: give a whole number from 1 to 9223372036854775807
    '-3' is not a run's id: give a whole number from 1 to 9223372036854775807
    '+3' is not a run's id: give a whole number from 1 to 9223372036854775807
    '007' is not a run's id: give a whole number from 1 to 9223372036854775807
    '٣' is not a run's id: give a whole number from 1 to 9223372036854775807
    '1_000' is not a run's id: give a whole number from 1 to 9223372036854775807
    True is not a run's id: give a whole number from 1 to 9223372036854775807
    """
    found = id_or_none(value)
    if found is None:
        raise NotAnId(value, what)
    return found


def id_or_none(value: object) -> int | None:
    """``read``'s id, or None when ``value`` is not one (a flow named ``"2025"`` is looked
    up by name alone when its digits are past ``MAX_ID``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 1 <= value <= MAX_ID else None
    if not isinstance(value, str):
        return None
    digits = value.strip()
    # Its length is checked before int(), which is slow on (or refuses) thousands of digits.
    if len(digits) > len(str(MAX_ID)) or not _DIGITS.fullmatch(digits):
        return None
    number = int(digits)
    return number if number <= MAX_ID else None


def shown(value: object, limit: int = 40) -> str:
    """``value`` as a refusal quotes it: ``'two'``, ``7``, cut short past ``limit``."""
    text = repr(str.__str__(value)) if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _a(what: str) -> str:
    return f"an {what}" if what[:1] in "aeiou" else f"a {what}"
