"""What differs between two versions of a flow, typed and in sentences a business user
reads — and the snapshot a version keeps. Pure: no SQL, no clock.

``compare(before, after)`` matches steps by their ids: a step of both is changed when
any of its columns differ (its position too), one only in ``after`` was added, one only
in ``before`` removed. The flow's own columns (name, start, condition, changes) come
first, then the steps in the order ``after`` runs them, then the removed ones.

>>> from flowrunner.flows.snapshot import FlowSnapshot
>>> flow = {"id": 1, "name": "Big orders", "start": "created", "condition": "amount > 1000"}
>>> one = FlowSnapshot.build(flow, [
...     {"id": 7, "position": 1, "kind": "approval", "title": "Manager approval",
...      "mode": "all", "duration": "1 week"},
...     {"id": 8, "position": 2, "kind": "send", "title": "Send to supplier"}])
>>> two = FlowSnapshot.build({**flow, "condition": "amount > 5000"}, [
...     {"id": 7, "position": 1, "kind": "approval", "title": "Manager approval",
...      "mode": "2", "duration": "3 days"},
...     {"id": 9, "position": 2, "kind": "notify", "title": "Tell finance"}])
>>> for change in compare(one, two):
...     print(change.sentence)
Flow: condition amount > 1000 → amount > 5000
Step 1 'Manager approval': duration 1 week → 3 days; mode all → 2
Added step 2 'Tell finance'
Removed step 2 'Send to supplier'
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from flowrunner.flows import snapshot
from flowrunner.foundations import shapes

What = Literal["flow", "added", "removed", "changed"]

# The flow's columns a version compares (``active`` is the live row's switch, not the
# version's: switching a flow off stops new runs of every version).
FLOW_FIELDS = ("name", "start", "condition", "changes")


@dataclass(frozen=True)
class Field:
    """One column that differs: its name, its value before and after (None: empty)."""

    name: str
    before: shapes.Plain
    after: shapes.Plain

    @property
    def sentence(self) -> str:
        return f"{self.name} {_shown(self.before)} → {_shown(self.after)}"


@dataclass(frozen=True)
class Change:
    """One difference between two versions: the flow's columns, or one step added,
    removed or changed (with the columns that differ)."""

    what: What
    step_id: shapes.Plain = None
    position: int | None = None
    title: str | None = None
    kind: str | None = None
    fields: tuple[Field, ...] = ()

    @property
    def sentence(self) -> str:
        said = "; ".join(f.sentence for f in self.fields)
        if self.what == "flow":
            return f"Flow: {said}"
        if self.what == "added":
            return f"Added {self._label()}"
        if self.what == "removed":
            return f"Removed {self._label()}"
        return f"{self._label()[0].upper()}{self._label()[1:]}: {said}"

    def _label(self) -> str:
        name = f"'{self.title}'" if self.title else f"({self.kind})"
        return f"step {self.position} {name}"


def compare(before: snapshot.FlowSnapshot, after: snapshot.FlowSnapshot) -> list[Change]:
    """The changes that make ``before`` into ``after`` (empty when they are the same)."""
    changes: list[Change] = []
    flow_fields = tuple(
        Field(name, getattr(before.flow, name), getattr(after.flow, name))
        for name in FLOW_FIELDS
        if getattr(before.flow, name) != getattr(after.flow, name)
    )
    if flow_fields:
        changes.append(Change("flow", fields=flow_fields))
    old = {str(step.id): step for step in before.steps}
    new = {str(step.id): step for step in after.steps}
    for step in after.steps:
        was = old.get(str(step.id))
        if was is None:
            changes.append(_step("added", step))
            continue
        fields = _step_fields(was, step)
        if fields:
            changes.append(replace(_step("changed", step), fields=fields))
    for step in before.steps:
        if str(step.id) not in new:
            changes.append(_step("removed", step))
    return changes


def _step(what: What, step: snapshot.StepSpec) -> Change:
    return Change(what, step.id, step.position, step.title, step.kind)


def _step_fields(was: snapshot.StepSpec, now: snapshot.StepSpec) -> tuple[Field, ...]:
    fields = [
        Field(name, before, after)
        for name, before, after in (
            ("position", was.position, now.position),
            ("kind", was.kind, now.kind),
            ("title", was.title, now.title),
        )
        if before != after
    ]
    columns_before, columns_after = was.columns, now.columns
    for name in sorted(set(columns_before) | set(columns_after)):
        if columns_before.get(name) != columns_after.get(name):
            fields.append(Field(name, columns_before.get(name), columns_after.get(name)))
    return tuple(fields)


def _shown(value: shapes.Plain) -> str:
    return "(none)" if value is None or value == "" else str(value)


def published(flow: shapes.Row, steps: list[shapes.RowDict]) -> snapshot.FlowSnapshot:
    """The snapshot a version keeps of a flow's rows: as a run would keep them, its
    ``active`` switch left out (it is the live row's, whatever the version)."""
    return snapshot.FlowSnapshot.build({**flow, "active": True}, steps)


@dataclass(frozen=True)
class Moved:
    """A waiting run's state as it stands on another version: where it waits there."""

    state: shapes.JsonDict
    position: int


def moved_state(
    run_id: object,
    state: shapes.Payload,
    before: snapshot.FlowSnapshot,
    after: snapshot.FlowSnapshot,
    to: int,
) -> Moved | str:
    """A run's state moved from ``before`` to ``after`` (version ``to``), or the sentence
    that says why it cannot be.

    A run moves when the steps it waits at are all in ``after``, together at one
    position, in the same order and of the same kinds: it keeps its lanes (answers,
    reminders sent, timers, attempts), its logical clock and its pass counts, at the
    position those steps hold in ``after``. A run that has not begun (no position yet)
    moves as it is.
    """
    data = dict(state)
    position = data.get("position")
    if position is None:
        return Moved(data, 0)
    here = before.steps_at(int(str(position)))
    ids = [str(step.id) for step in here]
    where = {str(step.id): step for step in after.steps}
    for step in here:
        label = f"'{step.title}'" if step.title else f"the {step.kind} step"
        found = where.get(str(step.id))
        if found is None:
            return f"run {run_id} waits at {label}, which version {to} removes"
        if found.kind != step.kind:
            return (
                f"run {run_id} waits at {label}, whose kind version {to} changes "
                f"({step.kind} → {found.kind})"
            )
    new_position = where[ids[0]].position if ids else int(str(position))
    if [str(step.id) for step in after.steps_at(new_position)] != ids:
        return (
            f"run {run_id} waits at {_names(here)} together, which version {to} does not "
            "keep together at one position"
        )
    # How often each position was entered follows its steps to where they are now (a
    # pass number is part of a step's command key); positions it does not keep go.
    passes: dict[str, object] = {}
    for old, count in dict(data.get("passes") or {}).items():
        first = before.steps_at(int(str(old)))[:1]
        now = where.get(str(first[0].id)) if first else None
        if now is not None:
            passes[str(now.position)] = count
    data["passes"] = passes
    data["position"] = new_position
    if data.get("last_goto") is not None:
        data["last_goto"] = None  # the goto taken named a position of the old version
    return Moved(data, new_position)


def _names(steps: tuple[snapshot.StepSpec, ...]) -> str:
    return " and ".join(f"'{s.title}'" if s.title else f"the {s.kind} step" for s in steps)
