"""How each kind of step is marked in a diagram: its label, its colour and its little picture.

One table for every output: the HTML and the SVG draw the same 16×16 picture (``paths``),
Mermaid uses the same label and colour with a shape of its own. An application's kinds are
labelled by their name and drawn as a hexagon holding the name's first letter, each in a
colour of its own.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from flowrunner.foundations.shapes import StepKind


@dataclass(frozen=True)
class Mark:
    """What tells a kind apart at a glance.

    ``name`` is the mark's class (``set``, ``wait``, ... or ``app`` for an application's
    kind); ``label`` the word shown; ``colour`` its hue; ``paths`` SVG path data on a
    16×16 grid, stroked; ``letter`` the letter an application kind's hexagon holds.
    """

    name: str
    label: str
    colour: str
    paths: tuple[str, ...]
    letter: str = ""


_HEXAGON = "M8 1.5 13.6 4.75V11.25L8 14.5 2.4 11.25V4.75Z"

BUILTIN: dict[str, Mark] = {
    # A pencil writing a value.
    "set": Mark("set", "Set", "#2563eb", ("M3 13l1-3.5L11 2.5l2.5 2.5L6.5 12z", "M9.5 4l2.5 2.5")),
    # An hourglass: a length of time.
    "wait": Mark(
        "wait",
        "Wait",
        "#b45309",
        ("M4 2h8M4 14h8", "M5 2c0 3.5 6 3.5 6 6s-6 2.5-6 6", "M11 2c0 3.5-6 3.5-6 6s6 2.5 6 6"),
    ),
    # A calendar page: a date in the record.
    "until": Mark(
        "until",
        "Until",
        "#a16207",
        ("M2.5 3.5h11v10h-11z", "M2.5 6.5h11", "M5.5 2v3M10.5 2v3", "M5 9.5h2M9 9.5h2M5 11.5h2"),
    ),
    # A diamond: a decision.
    "branch": Mark(
        "branch", "Branch", "#7c3aed", ("M8 1.5 14.5 8 8 14.5 1.5 8z", "M8 5v4M8 11v.5")
    ),
    # An envelope: an event arriving.
    "waitFor": Mark("waitFor", "Wait for", "#0e7490", ("M2 4h12v8.5H2z", "M2 4l6 5 6-5")),
    # A box holding a smaller one: another flow run inside this one.
    "subflow": Mark(
        "subflow", "Subflow", "#4338ca", ("M1.5 3h13v10h-13z", "M5 6h6v4H5z", "M8 3v3M8 10v3")
    ),
    # A bell: somebody is told.
    "notify": Mark(
        "notify", "Notify", "#be185d", ("M4 11.5V7a4 4 0 0 1 8 0v4.5l1.5 1.5h-11z", "M6.5 14.5h3")
    ),
}

# Hues for an application's kinds, each kind always the same one (by its name).
_APP_COLOURS = ("#047857", "#4d7c0f", "#0f766e", "#9333ea", "#c2410c", "#1d4ed8", "#15803d")


def mark(kind: StepKind) -> Mark:
    """The mark of ``kind``: a built-in kind's, or a hexagon with an app kind's initial.

    >>> mark("branch").label, mark("approval").label, mark("approval").letter
    ('Branch', 'approval', 'A')
    """
    found = BUILTIN.get(kind)
    if found is not None:
        return found
    colour = _APP_COLOURS[zlib.crc32(kind.encode("utf-8")) % len(_APP_COLOURS)]
    letter = next((c for c in kind if c.isalnum()), "?").upper()
    return Mark("app", kind, colour, (_HEXAGON,), letter=letter)


@dataclass(frozen=True)
class Look:
    """How a step's state in a run looks: a word, a sign and a colour."""

    word: str
    sign: str
    colour: str


# A step's state in a run, named once for every output (``progress`` decides them).
STATES: dict[str, Look] = {
    "done": Look("Done", "✓", "#15803d"),
    "timed_out": Look("Timed out", "◷", "#b45309"),
    "failed": Look("Failed", "✕", "#b91c1c"),
    "skipped": Look("Skipped", "↷", "#6b7280"),
    "waiting": Look("Waiting", "◔", "#1d4ed8"),
    "working": Look("Working", "▶", "#1d4ed8"),
    "retrying": Look("Retrying", "↻", "#c2410c"),
    "stopped": Look("Stopped", "■", "#6b7280"),
    "ahead": Look("Ahead", "○", "#6b7280"),
    "not_reached": Look("Not reached", "–", "#6b7280"),
}
