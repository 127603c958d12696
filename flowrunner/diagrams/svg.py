"""A diagram as one standalone SVG document: drawn twice, wide and down the page.

SVG text does not wrap by itself, so the layout is worked out here: each box's lines
are wrapped to its width by an estimate of the characters that fit. The wide drawing
puts positions side by side with the branches' other ways below them; the narrow one
(360 px) runs positions down the page with those ways on the right. A media query in the
document's own style shows the narrow drawing, and sizes the document to it, in a
window narrower than the wide drawing. Every text is escaped.
"""

from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass

from flowrunner.diagrams import marks, model, progress

NARROW_WIDTH = 360
_COLUMN = 176  # a wide column's width
_GAP = 40  # between wide columns: the connector
_PAD = 8
_MARK_R = 16  # the start and end circles' radius
_TRACK = 24  # a track of other ways, wide (down) and narrow (across: 16)
# Font sizes and line heights: title, facts and states, headings.
_TITLE, _TITLE_LH = 13, 16
_SMALL, _SMALL_LH = 11, 14


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _wrap(text: str, width: float, size: int, most: int) -> list[str]:
    """``text`` wrapped to ``width`` px at font ``size`` (an estimate), at most ``most`` lines."""
    per_line = max(8, int(width / (size * 0.58)))
    lines = textwrap.wrap(" ".join(text.split()), per_line, break_long_words=True) or [""]
    if len(lines) > most:
        rest = textwrap.shorten(" ".join(lines[most - 1 :]), per_line, placeholder="…")
        lines = [*lines[: most - 1], rest]
    return lines


@dataclass
class _Lines:
    """A box's text, wrapped: the title, each fact, the run state."""

    title: list[str]
    facts: list[str]
    state: list[str]
    bold: int  # how many of the state's lines are its headline

    @property
    def height(self) -> int:
        state = len(self.state) * _SMALL_LH + (4 if self.state else 0)
        return 2 * _PAD + 18 + len(self.title) * _TITLE_LH + len(self.facts) * _SMALL_LH + state


def _lines(box: model.Box, width: float) -> _Lines:
    inner = width - 2 * _PAD
    facts = [
        line for fact in box.facts for line in _wrap(f"{fact.name}: {fact.short}", inner, _SMALL, 3)
    ]
    state: list[str] = []
    if box.run is not None:
        look = marks.STATES[box.run.state]
        state = _wrap(f"{look.sign} {box.run.text}", inner, _SMALL, 2)
        for detail in box.run.details:
            state += _wrap(detail, inner, _SMALL, 2)
    return _Lines(_wrap(box.title, inner, _TITLE, 3), facts, state, min(1, len(state)))


def _mark(mark: marks.Mark, x: float, y: float) -> str:
    paths = "".join(f'<path d="{_e(d)}"/>' for d in mark.paths)
    letter = ""
    if mark.letter:
        letter = (
            f'<text x="8" y="10.6" text-anchor="middle" font-size="7" font-weight="700" '
            f'fill="{_e(mark.colour)}" stroke="none">{_e(mark.letter)}</text>'
        )
    return (
        f'<g transform="translate({x:g} {y:g})" fill="none" stroke="{_e(mark.colour)}" '
        f'stroke-width="1.4" stroke-linejoin="round" stroke-linecap="round">{paths}{letter}</g>'
    )


def _text(lines: list[str], x: float, y: float, size: int, lh: int, extra: str = "") -> str:
    spans = "".join(
        f'<tspan x="{x:g}" dy="{0 if i == 0 else lh}">{_e(line)}</tspan>'
        for i, line in enumerate(lines)
    )
    return f'<text x="{x:g}" y="{y:g}" font-size="{size}"{extra}>{spans}</text>'


def _box(box: model.Box, lines: _Lines, x: float, y: float, width: float) -> str:
    state = box.run.state if box.run is not None else ""
    dashed = ' stroke-dasharray="4 3"' if state in ("ahead", "skipped", "not_reached") else ""
    fill = "#fef2f2" if state == "failed" else "#ffffff"
    out = [
        f'<g class="frs-step" data-step="{_e(box.step_id)}" data-kind="{_e(box.kind)}" '
        f'data-lane="{box.lane}"' + (f' data-state="{_e(state)}"' if state else "") + ">",
        f'<rect x="{x:g}" y="{y:g}" width="{width:g}" height="{lines.height}" rx="5" '
        f'fill="{fill}" stroke="#cbd5e1"{dashed}/>',
        f'<rect x="{x:g}" y="{y:g}" width="4" height="{lines.height}" '
        f'fill="{_e(box.mark.colour)}"/>',
        _mark(box.mark, x + _PAD, y + _PAD - 1),
        f'<text x="{x + _PAD + 21:g}" y="{y + _PAD + 11:g}" font-size="{_SMALL}" font-weight="600" '
        f'fill="{_e(box.mark.colour)}">{_e(box.mark.label)}</text>',
    ]
    ty = y + _PAD + 18 + _TITLE - 2
    out.append(_text(lines.title, x + _PAD, ty, _TITLE, _TITLE_LH, ' font-weight="600"'))
    fy = ty + len(lines.title) * _TITLE_LH
    if lines.facts:
        out.append(_text(lines.facts, x + _PAD, fy, _SMALL, _SMALL_LH, ' fill="#475569"'))
    if lines.state and box.run is not None:
        look = marks.STATES[box.run.state]
        sy = fy + len(lines.facts) * _SMALL_LH + 4
        extra = f' font-weight="600" fill="{_e(look.colour)}"'
        out.append(_text(lines.state[:1], x + _PAD, sy, _SMALL, _SMALL_LH, extra))
        if lines.state[1:]:
            rest = lines.state[1:]
            out.append(_text(rest, x + _PAD, sy + _SMALL_LH, _SMALL, _SMALL_LH, ' fill="#0f172a"'))
    out.append("</g>")
    return "".join(out)


def _circle(x: float, y: float, word: str, end: bool) -> str:
    width = 4 if end else 2
    return (
        f'<g class="frs-{word.lower()}"><circle cx="{x:g}" cy="{y:g}" r="{_MARK_R}" fill="#fff" '
        f'stroke="#94a3b8" stroke-width="{width}"/><text x="{x:g}" y="{y + 3:g}" font-size="9" '
        f'font-weight="600" text-anchor="middle" fill="#64748b">{word}</text></g>'
    )


def _arrow(x: float, y: float, direction: str, colour: str) -> str:
    d = {
        "right": f"M{x:g} {y:g}l-8 -4.5v9z",
        "down": f"M{x:g} {y:g}l-4.5 -8h9z",
        "up": f"M{x:g} {y:g}l-4.5 8h9z",
        "left": f"M{x:g} {y:g}l8 -4.5v9z",
    }[direction]
    return f'<path d="{d}" fill="{colour}"/>'


def _way_look(way: model.Way) -> tuple[str, str]:
    colour = "#15803d" if way.taken else "#94a3b8"
    if way.how == "fault":
        colour = FAULT  # a fault path is red, taken or not
    width = 3 if way.taken else 2
    dash = ' stroke-dasharray="5 4"' if way.below and not way.taken else ""
    return colour, f'fill="none" stroke="{colour}" stroke-width="{width}"{dash}'


FAULT = "#b91c1c"


def _column_head(column: model.Column, x: float, y: float) -> str:
    word = f"{column.position}" + (f" · {column.visits}×" if column.visits > 1 else "")
    state = f" · {column.state.replace('_', ' ')}" if column.state else ""
    return (
        f'<text x="{x:g}" y="{y:g}" font-size="{_SMALL}" font-weight="600" fill="#64748b">'
        f"{_e(word + state)}</text>"
    )


def _column_frame(column: model.Column, x: float, y: float, w: float, h: float) -> str:
    stroke, width = ("#1d4ed8", 2) if column.state == "current" else ("#e2e8f0", 1)
    dash = ' stroke-dasharray="5 4"' if column.state in ("skipped", "not_reached") else ""
    return (
        f'<rect class="frs-col" data-position="{column.position}" x="{x:g}" y="{y:g}" '
        f'width="{w:g}" height="{h:g}" rx="7" fill="#f8fafc" stroke="{stroke}" '
        f'stroke-width="{width}"{dash}/>'
    )


def _caption(picture: model.Picture, x: float, width: float) -> tuple[list[str], int]:
    lines = [f'<tspan font-weight="700" font-size="15">{_e(picture.flow_name)}</tspan>']
    rest = _wrap(f"starts {picture.start}", width, 12, 3)
    if picture.run is not None:
        started = progress.when(picture.run.started_at, picture.run.zone)
        said = picture.run.sentence + (f". Started {started}" if started else "")
        rest += _wrap(said, width, 12, 4)
    lines += [_e(line) for line in rest]
    spans = "".join(
        f'<tspan x="{x:g}" dy="{0 if i == 0 else 16}">{line}</tspan>'
        for i, line in enumerate(lines)
    )
    text = f'<text x="{x:g}" y="20" font-size="12" fill="#334155">{spans}</text>'
    return [text], 20 + 16 * len(lines)


def wide(picture: model.Picture) -> tuple[str, int, int]:
    """The wide drawing: its SVG elements, width and height."""
    left = 16 + 2 * _MARK_R + _GAP
    caption, top = _caption(picture, 16, 900)
    top += 8
    inner = _COLUMN - 2 * _PAD
    laid = [[_lines(b, inner) for b in c.boxes] for c in picture.columns]
    height = max([20 + sum(ln.height + 8 for ln in col) + _PAD for col in laid] + [60])
    out = [*caption]
    xs = [left + i * (_COLUMN + _GAP) for i in range(len(picture.columns))]
    end_x = (xs[-1] + _COLUMN + _GAP + _MARK_R) if xs else left + _MARK_R
    head_y = top + 20
    for column, x, col_lines in zip(picture.columns, xs, laid, strict=True):
        out.append(_column_frame(column, x, top, _COLUMN, height))
        out.append(_column_head(column, x + _PAD, top + 15))
        y = top + 22
        for box, lines in zip(column.boxes, col_lines, strict=True):
            out.append(_box(box, lines, x + _PAD, y, inner))
            y += lines.height + 8
    out.append(_circle(16 + _MARK_R, head_y, "Start", False))
    out.append(_circle(end_x, head_y, "End", True))
    bottom = top + height
    centre = [x + _COLUMN / 2 for x in xs] + [end_x]
    for way in picture.ways:
        colour, stroke = _way_look(way)
        end = way.end_index(len(picture.columns))
        if way.how == "next":
            x1 = 16 + 2 * _MARK_R if way.source < 0 else xs[way.source] + _COLUMN
            x2 = (end_x - _MARK_R) if way.target is None else xs[end]
            out.append(f'<path class="frs-way" d="M{x1:g} {head_y:g}H{x2 - 2:g}" {stroke}/>')
            out.append(_arrow(x2, head_y, "right", colour))
            if way.label:
                out.append(_label((x1 + x2) / 2, head_y - 6, way.label))
            continue
        track_y = bottom + 16 + way.track * _TRACK
        from_x, to_x = centre[way.source], centre[end]
        stop = head_y + _MARK_R if way.target is None else bottom
        path = f"M{from_x:g} {bottom:g}V{track_y:g}H{to_x:g}V{stop + 3:g}"
        out.append(f'<path class="frs-way frs-other" d="{path}" {stroke}/>')
        out.append(_arrow(to_x, stop, "up", colour))
        target = "end" if way.target is None else str(picture.columns[way.target].position)
        words = f"{way.label} → {target}"
        ink = FAULT if way.how == "fault" else None
        out.append(_label((from_x + to_x) / 2, track_y + 4, words, boxed=True, ink=ink))
    width = int(end_x + _MARK_R + 16)
    total = int(bottom + 16 + picture.tracks * _TRACK + 8)
    return "".join(out), max(width, 320), total


def _label(x: float, y: float, text: str, *, boxed: bool = False, ink: str | None = None) -> str:
    box = ""
    if boxed:
        w = len(text) * 6 + 8
        box = f'<rect x="{x - w / 2:g}" y="{y - 10:g}" width="{w:g}" height="14" fill="#fff"/>'
    return (
        f'{box}<text x="{x:g}" y="{y:g}" font-size="10" text-anchor="middle" '
        f'fill="{ink or "#64748b"}">{_e(text)}</text>'
    )


def narrow(picture: model.Picture) -> tuple[str, int]:
    """The drawing down the page, ``NARROW_WIDTH`` wide: its SVG elements and height."""
    tracks = picture.tracks
    left, right = 12, NARROW_WIDTH - 12 - tracks * 16 - (8 if tracks else 0)
    caption, top = _caption(picture, left, NARROW_WIDTH - 2 * left)
    out = [*caption]
    cx = (left + right) / 2
    y = top + 8 + _MARK_R
    out.append(_circle(cx, y, "Start", False))
    y += _MARK_R
    heads: list[float] = []
    bottoms: list[float] = []
    inner = right - left - 2 * _PAD
    for column in picture.columns:
        y += 30
        heads.append(y + 14)
        lines = [_lines(b, inner) for b in column.boxes]
        height = 22 + sum(ln.height + 8 for ln in lines) + _PAD - (8 if lines else 0)
        out.append(_column_frame(column, left, y, right - left, max(height, 34)))
        out.append(_column_head(column, left + _PAD, y + 15))
        by = y + 22
        for box, box_lines in zip(column.boxes, lines, strict=True):
            out.append(_box(box, box_lines, left + _PAD, by, inner))
            by += box_lines.height + 8
        y += max(height, 34)
        bottoms.append(y)
    end_y = y + 30 + _MARK_R
    out.append(_circle(cx, end_y, "End", True))
    tops = [top + 8 + 2 * _MARK_R, *bottoms]
    for way in picture.ways:
        colour, stroke = _way_look(way)
        end = way.end_index(len(picture.columns))
        if way.how == "next":
            y1 = tops[way.source + 1]
            y2 = (end_y - _MARK_R) if way.target is None else heads[end] - 14
            out.append(f'<path class="frs-way" d="M{cx:g} {y1:g}V{y2 - 2:g}" {stroke}/>')
            out.append(_arrow(cx, y2, "down", colour))
            if way.label:
                out.append(
                    f'<text x="{cx + 8:g}" y="{(y1 + y2) / 2 + 4:g}" font-size="10" '
                    f'fill="#64748b">{_e(way.label)}</text>'
                )
            continue
        x = right + 10 + way.track * 16
        y1 = heads[way.source]
        y2, x2 = (end_y, cx + _MARK_R) if way.target is None else (heads[end], right)
        path = f"M{right:g} {y1:g}H{x:g}V{y2:g}H{x2 + 3:g}"
        out.append(f'<path class="frs-way frs-other" d="{path}" {stroke}/>')
        out.append(_arrow(x2, y2, "left", colour))
        target = "end" if way.target is None else str(picture.columns[way.target].position)
        ink = FAULT if way.how == "fault" else "#64748b"
        out.append(
            f'<text transform="translate({x + 4:g} {(y1 + y2) / 2:g}) rotate(90)" font-size="10" '
            f'text-anchor="middle" fill="{ink}">{_e(f"{way.label} → {target}")}</text>'
        )
    return "".join(out), int(end_y + _MARK_R + 16)


# The wide drawing may shrink to this share of its size before the narrow one is shown.
SHRINK = 0.7


def render(picture: model.Picture) -> str:
    """The standalone SVG document of ``picture``."""
    scope = f"frs-{picture.scope}"
    wide_body, width, height = wide(picture)
    narrow_body, narrow_height = narrow(picture)
    below = int(width * SHRINK)
    css = (
        f"#{scope}{{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;"
        f"width:100%;max-width:{width}px;height:auto;aspect-ratio:{width}/{height}}}"
        f"#{scope} .frs-narrow{{display:none}}"
        f"@media (max-width:{below}px){{#{scope}{{max-width:{NARROW_WIDTH}px;"
        f"aspect-ratio:{NARROW_WIDTH}/{narrow_height}}}"
        f"#{scope} .frs-wide{{display:none}}#{scope} .frs-narrow{{display:inline}}}}"
    )
    title = picture.flow_name + (f" — run {picture.run.id}" if picture.run else "")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<svg xmlns="http://www.w3.org/2000/svg" id="{scope}" width="{width}" height="{height}" '
        f'role="img" aria-label="{_e(title)}"><title>{_e(title)}</title><style>{css}</style>'
        f'<svg class="frs-wide" viewBox="0 0 {width} {height}" width="100%" height="100%">'
        f'<rect width="100%" height="100%" fill="#fff"/>{wide_body}</svg>'
        f'<svg class="frs-narrow" viewBox="0 0 {NARROW_WIDTH} {narrow_height}" width="100%" '
        f'height="100%"><rect width="100%" height="100%" fill="#fff"/>{narrow_body}</svg></svg>\n'
    )
