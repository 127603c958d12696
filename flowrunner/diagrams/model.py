"""A flow's diagram as plain values: its columns, their lanes, the ways between them.

Each position of the flow is a ``Column``; the steps sharing it are its lanes (``Box``),
each with its kind's mark, its title and the key facts of its columns. ``Way``s join the
columns: the connector from each to the next (from the start mark, to the end mark), a
branch's other way to its ``goto`` column or to the end, and a step's fault path ("if it
fails") to its ``on_failure`` column. A run drawn over its flow adds each box's
``StepRun`` and counts the ways it took (``progress``).

Pure: built from a ``FlowSnapshot`` (and a run's state and history), no SQL, no clock.
The renderers (``html``, ``svg``, ``mermaid``) only draw what is here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, tzinfo
from typing import Literal

from flowrunner.diagrams import marks
from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import config as config_mod
from flowrunner.foundations import shapes
from flowrunner.foundations.shapes import StepKind

# The reader's hook: given a step row (its columns as the snapshot holds them), whether
# this reader may see it. A step the reader cannot read is not drawn.
CanRead = Callable[[shapes.Row], bool]

# Where a reader goes from a subflow's box: the address of a flow (``("flow", name)``) or
# of a run (``("run", id)``), or None where there is none to give (a standalone drawing).
Href = Callable[[str, object], str | None]

# A fact longer than this is cut where a box has no room (the HTML shows it whole).
SHORT = 90

# The columns each built-in kind reads, in the order a box lists them.
_FACTS: dict[str, tuple[str, ...]] = {
    "set": ("field", "value"),
    "wait": ("duration",),
    "until": ("field", "duration"),
    "branch": ("condition", "goto"),
    "waitFor": ("event", "duration"),
    "notify": ("audience", "message"),
    "subflow": ("value", "field", "duration"),
}
# What a subflow step's columns are called on its box.
RUNS = "runs"
_SUBFLOW_FACTS = {"value": RUNS, "field": "on the record in"}
# What an application kind's step may say about its wait, after its inputs.
_WAITING = ("mode", "condition", "duration", "remind")
# The label of a fault path's way.
IF_IT_FAILS = "if it fails"


@dataclass(frozen=True)
class Fact:
    """One column of a step as a box shows it: ``duration: 1 week``."""

    name: str
    value: str

    @property
    def short(self) -> str:
        """The value cut to fit a box, with an ellipsis where it was cut."""
        flat = " ".join(self.value.split())
        return flat if len(flat) <= SHORT else flat[: SHORT - 1].rstrip() + "…"


@dataclass(frozen=True)
class StepRun:
    """Where a step stands in a run: ``state`` (a key of ``marks.STATES``), a headline
    saying so (``Done Mon 2 Mar 09:00 UTC``, ``Waiting for po.decided``), the details
    under it (``answered``; ``1 answer of 2 asked, 2 needed``), the moment, and how many
    passes the run made through the step."""

    state: str
    text: str
    details: tuple[str, ...] = ()
    at: datetime | None = None
    passes: int = 0

    @property
    def sentence(self) -> str:
        """The headline and details on one line."""
        return " · ".join((self.text, *self.details))


@dataclass(frozen=True)
class Link:
    """Where a subflow step leads: the flow it runs, and (in a run) the child run it
    started, the latest pass's."""

    flow: str
    run: int | None = None


@dataclass(frozen=True)
class Box:
    """One step drawn as a lane of its position's column.

    ``key`` is unique in the diagram and safe as an identifier (``s3``); ``lane`` its
    place among the drawn lanes of its column (hidden steps leave no gap).
    """

    key: str
    step_id: shapes.Plain
    position: int
    lane: int
    kind: StepKind
    mark: marks.Mark
    title: str
    facts: tuple[Fact, ...]
    run: StepRun | None = None
    link: Link | None = None


ColumnState = Literal["done", "current", "ahead", "skipped", "not_reached"]


@dataclass(frozen=True)
class Column:
    """A position of the flow: its drawn steps, top to bottom, and (in a run) its state."""

    index: int
    position: int
    boxes: tuple[Box, ...]
    state: ColumnState | None = None
    visits: int = 0

    @property
    def key(self) -> str:
        return f"p{self.index}"


END = "end"


@dataclass(frozen=True)
class Way:
    """A connector between columns, by their index (``-1`` the start mark, ``None`` the end).

    ``how`` is ``next`` (on to the following position, or the end after the last),
    ``other`` (a branch's way when its condition does not hold: to its ``goto``, or the
    end) or ``fault`` (a step's way when its command fails for good: to its
    ``on_failure``). ``track`` is the row below the columns an ``other`` or ``fault`` way
    is drawn on (ways that would overlap get different tracks). ``taken`` counts the
    run's passes along it.
    """

    source: int
    target: int | None
    how: Literal["next", "other", "fault"]
    label: str = ""
    step: str | None = None
    track: int = 0
    taken: int = 0

    @property
    def below(self) -> bool:
        """Whether the way is drawn below the columns, on a track (not a next way)."""
        return self.how != "next"

    @property
    def back(self) -> bool:
        """Whether the way goes back to an earlier column (a loop)."""
        return self.target is not None and self.target <= self.source

    def end_index(self, columns: int) -> int:
        """The column index the way ends at, the end mark counting as one past the last."""
        return columns if self.target is None else self.target


@dataclass(frozen=True)
class RunSummary:
    """The run a diagram is drawn over: its id, status, why, and when it started and ended."""

    id: int
    status: str
    sentence: str
    started_at: datetime | None = None
    ended_at: datetime | None = None
    zone: tzinfo | None = None
    """The wall clock its moments are written on (the runner's); None: UTC."""


@dataclass(frozen=True)
class Picture:
    """Everything a renderer draws: the flow, its columns and ways, and maybe a run."""

    flow_name: str
    start: str
    columns: tuple[Column, ...]
    ways: tuple[Way, ...]
    digest: str
    run: RunSummary | None = None

    def box(self, key: str) -> Box:
        return next(b for c in self.columns for b in c.boxes if b.key == key)

    @property
    def scope(self) -> str:
        """A name for this drawing's element and style, the same for the same drawing and
        different for another (another flow, run, or reader), so several share a page."""
        return hashlib.sha256(repr(self).encode("utf-8")).hexdigest()[:12]

    @property
    def tracks(self) -> int:
        """How many rows the ``other`` and ``fault`` ways need below the columns."""
        return max((w.track + 1 for w in self.ways if w.below), default=0)


def step_row(flow: snapshot.FlowSpec, step: snapshot.StepSpec) -> shapes.RowDict:
    """The step row as the snapshot holds it, for the reader's ``can_read`` hook."""
    return {
        "id": step.id,
        "flow_id": flow.id,
        "position": step.position,
        "kind": step.kind,
        "title": step.title,
        **step.columns,
    }


def starts(flow: snapshot.FlowSpec) -> str:
    """How the flow starts, in words: ``when a record is created, if amount > 10000``."""
    how = {
        "created": "when a record is created",
        "updated": "when a record is updated",
        "manual": "when an operator starts it",
    }.get(flow.start, f"on {flow.start}")
    if flow.start == "schedule" and flow.schedule:
        how = f"on the schedule {flow.schedule}"
    if flow.start == "updated" and flow.changes:
        how = f"when a record's {flow.changes} changes"
    return f"{how}, if {flow.condition}" if flow.condition else how


def facts(step: snapshot.StepSpec, kind: config_mod.KindConfig | None) -> tuple[Fact, ...]:
    """The key facts of a step's columns, in the order its kind reads them."""
    values = step.columns
    if step.kind in _FACTS:
        names: tuple[str, ...] = _FACTS[step.kind]
    elif kind is not None:
        names = (*kind.inputs, *_WAITING)
    else:
        # A kind the binding no longer has: show every column the row fills.
        names = tuple(sorted(values))
    said = _SUBFLOW_FACTS if step.kind == "subflow" else {}
    found = [Fact(said.get(n, n), _text(values[n])) for n in names if values.get(n) is not None]
    if kind is not None and kind.wait_for is not None:
        found.insert(len(kind.inputs), Fact("waits for", kind.wait_for))
    after, audience = values.get("escalate"), values.get("escalate_to")
    if after is not None and audience is not None:
        found.append(Fact("escalates", f"to {_text(audience)} after {_text(after)}"))
    return tuple(found)


def _link(step: snapshot.StepSpec) -> Link | None:
    """A subflow step's way to the flow it runs."""
    flow = step.get("value") if step.kind == "subflow" else None
    return None if flow is None else Link(clean(str(flow)))


def _title(step: snapshot.StepSpec) -> str:
    """The step's title as drawn; a step without one is called by its kind."""
    title = clean(step.title or "")
    return title if title.strip() else marks.mark(step.kind).label


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return clean(str(value))


def clean(text: str) -> str:
    r"""``text`` without the control characters no XML document may hold (tabs and line
    breaks become spaces); everything else is kept, to be escaped by each renderer.

    >>> clean("a\x00b\tc")
    'a b c'
    """
    return "".join(
        " " if (ord(c) < 0x20 or c in "\ufffe\uffff" or 0xD800 <= ord(c) <= 0xDFFF) else c
        for c in text
    )


def build(
    snap: snapshot.FlowSnapshot,
    *,
    kinds: Mapping[StepKind, config_mod.KindConfig] | None = None,
    can_read: CanRead | None = None,
) -> Picture:
    """The diagram of a flow as ``snap`` holds it, showing only what ``can_read`` allows.

    >>> snap = snapshot.FlowSnapshot.build(
    ...     {"id": 1, "name": "Follow up", "start": "manual"},
    ...     [{"id": 1, "position": 1, "kind": "wait", "title": "Pause", "duration": "1 day"},
    ...      {"id": 2, "position": 2, "kind": "branch", "title": "Again?",
    ...       "condition": "status = open", "goto": 1}])
    >>> picture = build(snap)
    >>> [(c.position, [b.title for b in c.boxes]) for c in picture.columns]
    [(1, ['Pause']), (2, ['Again?'])]
    >>> [(w.source, w.target, w.how, w.label) for w in picture.ways]
    [(-1, 0, 'next', ''), (0, 1, 'next', ''), (1, None, 'next', 'yes'), (1, 0, 'other', 'no')]
    """
    kinds = kinds or {}
    index = {position: i for i, position in enumerate(snap.positions)}
    columns: list[Column] = []
    ways: list[Way] = [Way(-1, 0 if index else None, "next")]
    count = 0
    for i, position in enumerate(snap.positions):
        boxes: list[Box] = []
        for step in snap.steps_at(position):
            count += 1
            if can_read is not None and not can_read(step_row(snap.flow, step)):
                continue
            boxes.append(
                Box(
                    key=f"s{count}",
                    step_id=step.id,
                    position=position,
                    lane=len(boxes),
                    kind=step.kind,
                    mark=marks.mark(step.kind),
                    title=_title(step),
                    facts=facts(step, kinds.get(step.kind)),
                    link=_link(step),
                )
            )
        columns.append(Column(index=i, position=position, boxes=tuple(boxes)))
        following = i + 1 if i + 1 < len(snap.positions) else None
        branch = next((b for b in boxes if b.kind == "branch"), None)
        if branch is None:
            ways.append(Way(i, following, "next"))
        else:
            ways.append(Way(i, following, "next", "yes", branch.key))
            goto = _goto(snap.steps_at(position), branch.step_id, "goto")
            target = index.get(goto) if goto is not None else None
            ways.append(Way(i, target, "other", "no", branch.key))
        for box in boxes:
            if box.kind not in _FACTS:  # a step that runs a command: not a built-in kind
                fault = _goto(snap.steps_at(position), box.step_id, "on_failure")
                if fault is not None:
                    ways.append(Way(i, index.get(fault), "fault", IF_IT_FAILS, box.key))
    if not snap.positions:
        ways = [Way(-1, None, "next")]
    return Picture(
        flow_name=clean(snap.flow.name),
        start=clean(starts(snap.flow)),
        columns=tuple(columns),
        ways=_tracked(ways, len(columns)),
        digest=snap.digest,
    )


def _goto(steps: tuple[snapshot.StepSpec, ...], step_id: shapes.Plain, column: str) -> int | None:
    """The position a step's ``goto`` (or ``on_failure``) names, as written."""
    step = next(s for s in steps if s.id == step_id)
    raw = step.get(column)
    if raw is None:
        return None
    try:
        number: float | None = float(str(raw).strip())
    except ValueError:
        number = None
    # A goto that broke after it was saved (the run would fail there): drawn to the end.
    return int(number) if number is not None and number.is_integer() else None


def _tracked(ways: list[Way], columns: int) -> tuple[Way, ...]:
    """Give each way below the columns the first track where it overlaps no other way."""
    ends: list[int] = []  # per track, the last column its ways reach
    placed: dict[int, Way] = {}
    others = [(i, w) for i, w in enumerate(ways) if w.below]
    for i, way in sorted(others, key=lambda iw: _span(iw[1], columns)):
        low, high = _span(way, columns)
        track = next((t for t, end in enumerate(ends) if end < low), len(ends))
        if track == len(ends):
            ends.append(high)
        else:
            ends[track] = high
        placed[i] = replace(way, track=track)
    return tuple(placed.get(i, way) for i, way in enumerate(ways))


def _span(way: Way, columns: int) -> tuple[int, int]:
    end = way.end_index(columns)
    return (min(way.source, end), max(way.source, end))
