"""The immutable, content-hashed copy of a flow and its steps that a run executes.

A run keeps the snapshot it started with, so editing a flow changes only runs that
start afterwards. ``FlowSnapshot.build`` takes rows as mappings (as read from the
flows and steps tables); ``to_dict``/``from_dict`` round-trip it through JSON for
storage on the run row.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from flowrunner.flows import spelling
from flowrunner.foundations import shapes
from flowrunner.foundations.shapes import StepKind

# Columns of a step row that are structure, not what the kind reads.
STEP_STRUCTURE = ("id", "flow_id", "position", "kind", "title")
FLOW_COLUMNS = ("id", "name", "start", "condition", "changes", "active", "calendar")


def _plain(value: object) -> shapes.Plain:
    """A JSON-safe, comparable form of a stored column value."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _empty(value: object) -> bool:
    return value is None or (isinstance(value, str) and value.strip() == "")


@dataclass(frozen=True)
class FlowSpec:
    """A flow row as the run started with it."""

    id: shapes.Plain
    name: str
    start: str
    condition: str | None = None
    changes: str | None = None
    active: bool = True
    tenant: shapes.Plain = None
    # The calendar the flow counts business time on, when it names one.
    calendar: str | None = None
    schedule: str | None = None
    """A flow that starts on a schedule: its cron fields and zone (``0 6 * * mon UTC``)."""


@dataclass(frozen=True)
class StepSpec:
    """A step row: its place and kind, and the non-empty columns its kind reads."""

    id: shapes.Plain
    position: int
    kind: StepKind
    title: str | None = None
    values: tuple[tuple[str, shapes.Plain], ...] = field(default_factory=tuple)

    def get(self, column: str, default: shapes.Plain = None) -> shapes.Plain:
        for name, value in self.values:
            if name == column:
                return value
        return default

    @property
    def columns(self) -> dict[str, shapes.Plain]:
        return dict(self.values)

    def label(self) -> str:
        """How a sentence names this step: its title, else its kind, with its position."""
        name = f"'{self.title}'" if self.title else f"the {self.kind} step"
        return f"{name} at position {self.position}"


@dataclass(frozen=True)
class FlowSnapshot:
    """A flow and its ordered steps, with a digest of their content."""

    flow: FlowSpec
    steps: tuple[StepSpec, ...]
    digest: str

    @classmethod
    def build(cls, flow_row: shapes.Row, step_rows: Iterable[shapes.Row]) -> FlowSnapshot:
        flow = FlowSpec(
            id=_plain(flow_row["id"]),
            name=str(flow_row.get("name") or ""),
            start=str(flow_row.get("start") or ""),
            condition=None if _empty(flow_row.get("condition")) else str(flow_row["condition"]),
            changes=None if _empty(flow_row.get("changes")) else str(flow_row["changes"]),
            active=bool(True if flow_row.get("active") is None else flow_row["active"]),
            tenant=_plain(flow_row.get("tenant")),
            calendar=None if _empty(flow_row.get("calendar")) else str(flow_row["calendar"]),
            schedule=None if _empty(flow_row.get("schedule")) else str(flow_row["schedule"]),
        )
        steps = []
        for row in step_rows:
            values = tuple(
                sorted(
                    (str(k), _plain(v))
                    for k, v in row.items()
                    if k not in STEP_STRUCTURE and not _empty(v)
                )
            )
            steps.append(
                StepSpec(
                    id=_plain(row.get("id")),
                    position=int(row["position"]),
                    kind=str(spelling.canonical_kind(str(row["kind"]))),
                    title=None if _empty(row.get("title")) else str(row["title"]),
                    values=values,
                )
            )
        steps.sort(key=lambda s: (s.position, str(s.id)))
        body = cls._body(flow, tuple(steps))
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        return cls(flow=flow, steps=tuple(steps), digest=digest)

    @staticmethod
    def _body(flow: FlowSpec, steps: tuple[StepSpec, ...]) -> shapes.JsonDict:
        head: shapes.JsonDict = {
            "id": flow.id,
            "name": flow.name,
            "start": flow.start,
            "condition": flow.condition,
            "changes": flow.changes,
            "active": flow.active,
            "tenant": flow.tenant,
        }
        # Only when named: the digests of snapshots stored before these columns stand.
        if flow.calendar is not None:
            head["calendar"] = flow.calendar
        if flow.schedule is not None:
            head["schedule"] = flow.schedule
        return {
            "flow": head,
            "steps": [
                {
                    "id": s.id,
                    "position": s.position,
                    "kind": s.kind,
                    "title": s.title,
                    "values": [list(v) for v in s.values],
                }
                for s in steps
            ],
        }

    def to_dict(self) -> shapes.JsonDict:
        return {**self._body(self.flow, self.steps), "digest": self.digest}

    @classmethod
    def from_dict(cls, data: shapes.Payload) -> FlowSnapshot:
        flow = FlowSpec(**data["flow"])
        steps = tuple(
            StepSpec(
                id=s["id"],
                position=int(s["position"]),
                kind=s["kind"],
                title=s["title"],
                values=tuple((str(k), v) for k, v in s["values"]),
            )
            for s in data["steps"]
        )
        snap = cls(flow=flow, steps=steps, digest=str(data["digest"]))
        body = cls._body(flow, steps)
        if hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest() != snap.digest:
            raise ValueError("the stored snapshot does not match its digest")
        return snap

    @functools.cached_property
    def positions(self) -> tuple[int, ...]:
        return tuple(sorted({s.position for s in self.steps}))

    @functools.cached_property
    def _at(self) -> dict[int, tuple[StepSpec, ...]]:
        return {p: tuple(s for s in self.steps if s.position == p) for p in self.positions}

    def steps_at(self, position: int) -> tuple[StepSpec, ...]:
        return self._at.get(position, ())

    @functools.cached_property
    def _by_id(self) -> dict[str, StepSpec]:
        found: dict[str, StepSpec] = {}
        for step in self.steps:
            found.setdefault(str(step.id), step)  # the first, as a scan would find it
        return found

    def step_by_id(self, step_id: object) -> StepSpec | None:
        """The step whose id reads as ``step_id`` does (as text), or None."""
        return self._by_id.get(str(step_id))

    def next_position(self, position: int) -> int | None:
        later = [p for p in self.positions if p > position]
        return later[0] if later else None
