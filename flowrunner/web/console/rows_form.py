"""Flow and step rows as the console's forms show and send them.

A form shows the columns a row's kind reads (and any other that holds a value, so it can
be emptied); what it sends is laid over the stored row and saved as any save is. A
refusal's field errors are put back beside their fields; one about a column the form
does not show is said above it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from flowrunner import binding as binding_mod
from flowrunner import errors
from flowrunner.flows import rows, validation
from flowrunner.web.console import page as page_mod

FLOW_FIELDS = ("name", "start", "condition", "changes", "active", "schedule", "calendar")
STEP_FIXED = ("position", "kind", "title")

HINTS = {
    "condition": "status = open",
    "changes": "a column, e.g. priority",
    "schedule": "0 6 * * mon Europe/Berlin",
    "duration": "2 days",
    "remind": "1 day",
    "goto": "a position",
    "mode": "any, all, 2 or 60%",
    "value": "the value to write; a subflow: the manual flow it runs",
    "message": "what to tell (up to 500 characters)",
    "position": "1",
    "on_failure": "a position, to go on at if its command fails",
    "escalate": "2 days, before it tells escalate_to",
    "escalate_to": "an audience, told once",
}

# What a kind does, beside its name where the form offers it (a kind that needs saying).
KIND_SENTENCES = {
    "subflow": "subflow — runs a manual flow and waits until it ends",
}


def kind_options(kinds: Iterable[str]) -> list[tuple[str, str]]:
    """The kinds a step's form offers, each with its sentence where it has one."""
    return [(kind, KIND_SENTENCES.get(kind, kind)) for kind in kinds]


@dataclasses.dataclass
class Problems:
    """A refusal's sentences: beside each field, and the rest above the form."""

    fields: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    general: list[str] = dataclasses.field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.fields or self.general)

    def at(self, field: str) -> list[str]:
        return self.fields.get(field, [])

    @classmethod
    def of(cls, refused: errors.RowInvalid, shown: Iterable[str]) -> Problems:
        """The field errors of ``refused``; those of fields not ``shown`` go above."""
        shown = set(shown)
        found = cls()
        labelled = refused.rows if isinstance(refused, validation.RowsInvalid) else None
        pairs: list[tuple[str | None, errors.FieldError]] = (
            [(label, e) for label, errs in labelled for e in errs]
            if labelled is not None
            else [(None, e) for e in refused.errors]
        )
        for label, error in pairs:
            if label is None and error.field in shown:
                found.fields.setdefault(error.field, []).append(error.message)
            else:
                where = f"{label}: " if label else ""
                found.general.append(f"{where}{error.field}: {error.message}")
        return found

    @classmethod
    def saying(cls, sentence: str) -> Problems:
        return cls(general=[sentence])


@dataclasses.dataclass
class Editing:
    """A form being filled in: which, its values and its problems (after a refusal)."""

    form: str
    values: dict[str, str]
    problems: Problems = dataclasses.field(default_factory=Problems)


class StepColumns:
    """The step columns of one binding, and which kind reads which."""

    def __init__(self, binding: binding_mod.FlowBinding) -> None:
        self.binding = binding
        self.details = tuple(
            c for c in (*rows.STEP_READ_COLUMNS, *binding.input_columns) if c not in STEP_FIXED
        )
        self.kinds = binding.kind_names
        reads: dict[str, set[str]] = {column: set() for column in self.details}
        for kind in self.kinds:
            for column in self.read_by(kind):
                reads.setdefault(column, set()).add(kind)
        self._readers = {c: tuple(k for k in self.kinds if k in reads[c]) for c in self.details}

    def read_by(self, kind: str | None) -> tuple[str, ...]:
        """The detail columns ``kind`` reads, needed first; none for an unknown kind."""
        canonical = _canonical(kind, self.kinds)
        if canonical is None:
            return ()
        needed, optional = rows.reads(self.binding, canonical)
        return tuple(c for c in (*needed, *optional) if c in self.details)

    def needed_by(self, kind: str | None) -> tuple[str, ...]:
        canonical = _canonical(kind, self.kinds)
        return () if canonical is None else rows.reads(self.binding, canonical)[0]

    def readers(self, column: str) -> tuple[str, ...]:
        """The kinds that read ``column`` (for the page's script: hide it for others)."""
        return self._readers.get(column, ())

    def shown(self, values: Mapping[str, Any], problems: Problems | None = None) -> list[str]:
        """The detail columns a step's form shows: its kind's, and any holding a value
        or a problem."""
        kind = values.get("kind")
        keep = set(self.read_by(None if kind is None else str(kind)))
        keep |= {c for c in self.details if not _blank(values.get(c))}
        if problems is not None:
            keep |= {c for c in self.details if problems.at(c)}
        return [c for c in self.details if c in keep]


def _canonical(kind: str | None, kinds: Sequence[str]) -> str | None:
    if kind is None:
        return None
    for name in kinds:
        if name.casefold() == kind.strip().casefold():
            return name
    return None


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def calendar_options(binding: binding_mod.FlowBinding) -> list[tuple[str, str]]:
    """What a flow's ``calendar`` may be, as its form offers it: the binding's default (or
    the tenant's) first, then each calendar the binding names."""
    default = "the tenant's, else the default" if binding.calendar_for else "the default"
    if binding.calendar is not None:
        default += f" ({binding.calendar})"
    return [("", default), *((name, name) for name in binding.calendars)]


def flow_row(form: page_mod.Form) -> dict[str, Any]:
    """The flow columns a form sends (``active`` as a flag)."""
    row: dict[str, Any] = {name: form.get(name) for name in FLOW_FIELDS if name in form}
    if "active" in row:
        row["active"] = row["active"] in ("true", "yes", "on", "1")
    return row


def step_row(form: page_mod.Form, columns: StepColumns) -> dict[str, Any]:
    """The step columns a form sends; a blank one is empty."""
    names = (*STEP_FIXED, *columns.details)
    return {name: (form.get(name).strip() or None) for name in names if name in form}


def as_values(row: Mapping[str, Any]) -> dict[str, str]:
    """A row's values as a form shows them."""
    from flowrunner.web.console import shown

    return {str(k): shown.text(v) for k, v in row.items()}


def next_position(steps: Sequence[Mapping[str, Any]]) -> int:
    """Where a new step goes: after the last, by the flow's own step (10s, or 1s)."""
    positions = sorted({int(s["position"]) for s in steps})
    if not positions:
        return 10
    step = 10 if all(p % 10 == 0 for p in positions) else 1
    return positions[-1] + step
