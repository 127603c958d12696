"""A diagram as Mermaid flowchart text, for Markdown documents that render Mermaid.

Each position is a subgraph named by its number holding its steps (lanes top to
bottom); each kind has a shape and a class of its own (a branch a rhombus, an app kind
a subroutine box); the ways are links, a branch's other way dotted, a fault path dotted
and red. A run adds each step's state to its label and class and draws the ways it took
thick.

Every text is quoted and written with Mermaid's entity codes for ``"``, ``#``, ``<``,
``>``, ``&`` and the backtick, so a title cannot end its label or become markup.
"""

from __future__ import annotations

from flowrunner.diagrams import marks, model, progress
from flowrunner.foundations.shapes import StepKind

# The shape each kind is drawn as: (opening, closing) around the quoted label.
_SHAPES: dict[str, tuple[str, str]] = {
    "set": ("[/", "/]"),
    "wait": ("([", "])"),
    "until": ("[\\", "\\]"),
    "branch": ("{", "}"),
    "waitFor": (">", "]"),
    "notify": ("[/", "\\]"),
    "subflow": ("[[", "]]"),
    "app": ("[[", "]]"),
}
_ESCAPED = frozenset('"#<>&`')


def text(value: str) -> str:
    """``value`` safe inside a quoted Mermaid label: one line, entity codes for markup.

    >>> text('Say "hi" <b>#1</b>')
    'Say #34;hi#34; #60;b#62;#35;1#60;/b#62;'
    """
    flat = " ".join(str(value).split())
    return "".join(f"#{ord(c)};" if c in _ESCAPED else c for c in flat)


def _label(*lines: str) -> str:
    return '"' + "<br/>".join(text(line) for line in lines if line) + '"'


def _kind_class(mark: marks.Mark, kind: StepKind) -> str:
    return f"k_{mark.name}" if mark.name != "app" else f"k_app_{_ident(kind)}"


def _ident(name: str) -> str:
    return "".join(c if c.isascii() and c.isalnum() else "_" for c in name)


def render(picture: model.Picture) -> str:
    """The Mermaid text of ``picture``."""
    out = ["flowchart LR"]
    run = picture.run
    out.append(f"  %% {text(picture.flow_name)}: {text(picture.start)}")
    start = ["Start", picture.flow_name, picture.start]
    if run is not None:
        if run.started_at is not None:
            start.append(f"Run {run.id} started {progress.when(run.started_at, run.zone)}")
        start.append(run.sentence)
    out.append(f"  start([{_label(*start)}])")
    kinds: dict[str, tuple[marks.Mark, list[str]]] = {}
    states: dict[str, list[str]] = {}
    for column in picture.columns:
        heading = f"Position {column.position}"
        if column.state is not None:
            heading += f" · {column.state.replace('_', ' ')}"
        out.append(f"  subgraph {column.key}[{_label(heading)}]")
        out.append("    direction TB")
        if not column.boxes:
            out.append(f"    {column.key}_none[{_label('—')}]")
        for box in column.boxes:
            opening, closing = _SHAPES[box.mark.name]
            lines = [f"{box.mark.label} · {box.title}"]
            lines += [f"{f.name}: {f.short}" for f in box.facts]
            if box.run is not None:
                look = marks.STATES[box.run.state]
                lines.append(f"{look.sign} {box.run.text}")
                lines.extend(box.run.details)
                states.setdefault(box.run.state, []).append(box.key)
            out.append(f"    {box.key}{opening}{_label(*lines)}{closing}")
            kinds.setdefault(_kind_class(box.mark, box.kind), (box.mark, []))[1].append(box.key)
        out.append("  end")
    finish = ["End"]
    if run is not None and run.ended_at is not None:
        finish.append(f"ended {progress.when(run.ended_at, run.zone)}")
    out.append(f"  finish([{_label(*finish)}])")
    thick: list[int] = []
    faults: list[int] = []
    for number, way in enumerate(picture.ways):
        source = "start" if way.source < 0 else (way.step or picture.columns[way.source].key)
        target = "finish" if way.target is None else picture.columns[way.target].key
        arrow = "-.->" if way.below else "-->"
        label = way.label + (f" ×{way.taken}" if way.taken > 1 else "")
        link = f"{arrow}|{_label(label)}|" if label else arrow
        out.append(f"  {source} {link} {target}")
        if way.how == "fault":
            faults.append(number)  # red, taken or not: a fault path
        elif way.taken:
            thick.append(number)
    for name, (mark, keys) in sorted(kinds.items()):
        out.append(f"  classDef {name} fill:#ffffff,stroke:{mark.colour},stroke-width:2px")
        out.append(f"  class {','.join(keys)} {name}")
    for state, keys in sorted(states.items()):
        look = marks.STATES[state]
        dashed = ",stroke-dasharray:4 3" if state in ("ahead", "skipped", "not_reached") else ""
        out.append(f"  classDef st_{state} color:{look.colour}{dashed}")
        out.append(f"  class {','.join(keys)} st_{state}")
    if thick:
        out.append(f"  linkStyle {','.join(map(str, thick))} stroke-width:3px,stroke:#15803d")
    for number in faults:
        width = 3 if picture.ways[number].taken else 2
        out.append(f"  linkStyle {number} stroke-width:{width}px,stroke:#b91c1c")
    return "\n".join(out) + "\n"
