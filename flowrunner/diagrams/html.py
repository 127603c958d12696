"""A diagram as self-contained HTML: inline style and pictures, no script, nothing fetched.

``document`` gives a whole page; ``fragment`` the ``<figure>`` alone (with its style), to
embed in a page of one's own, as the console does. Every text of the flow, its steps and
the run is escaped. The layout (``style``) runs left to right, and down the page where the
diagram's box is too narrow for its columns.
"""

from __future__ import annotations

import html
import re

from flowrunner.diagrams import marks, model, progress, style


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def picture_svg(mark: marks.Mark) -> str:
    """A kind's 16×16 picture as an inline ``<svg>``."""
    paths = "".join(f'<path d="{_e(d)}"/>' for d in mark.paths)
    letter = ""
    if mark.letter:
        letter = (
            '<text x="8" y="10.6" text-anchor="middle" font-size="7" font-weight="700" '
            f'fill="currentColor" stroke="none">{_e(mark.letter)}</text>'
        )
    return (
        '<svg viewBox="0 0 16 16" width="16" height="16" aria-hidden="true" fill="none" '
        'stroke="currentColor" stroke-width="1.4" stroke-linejoin="round" '
        f'stroke-linecap="round">{paths}{letter}</svg>'
    )


def scope_of(picture: model.Picture) -> str:
    """The id of the diagram's element (``model.Picture.scope``)."""
    return f"frd-{picture.scope}"


# Grid lines (1-based) of the tracks ``style`` lays out: start, then gap + two halves per
# position, then a gap and the end.
def _cell(index: int) -> int:
    return 4 + 3 * index


def _centre(index: int) -> int:
    return 5 + 3 * index if index >= 0 else 2


def _gap_before(index: int) -> int:
    return 3 + 3 * index


def _link(link: model.Link, href: model.Href | None) -> str:
    """A subflow's way to the flow it runs and to its child run: links where ``href``
    gives their addresses, words where it does not."""

    def to(what: str, key: object, words: str) -> str:
        address = href(what, key) if href is not None else None
        if address is None:
            return _e(words)
        return f'<a href="{_e(address)}" data-{what}="{_e(key)}">{_e(words)}</a>'

    said = "Runs " + to("flow", link.flow, link.flow)
    if link.run is not None:
        said += " · " + to("run", link.run, f"run {link.run}")
    return f'<p class="frd-link">{said}</p>'


def _box(box: model.Box, scope: str, href: model.Href | None = None) -> str:
    # A subflow's link line names the flow it runs: its ``runs`` fact would say it twice.
    shown = [f for f in box.facts if box.link is None or f.name != model.RUNS]
    facts = "".join(
        f'<div title="{_e(f.value)}"><dt>{_e(f.name)}</dt> <dd>{_e(f.value)}</dd></div>'
        for f in shown
    )
    state = ""
    attrs = ""
    if box.run is not None:
        look = marks.STATES[box.run.state]
        attrs = f' data-state="{_e(box.run.state)}"'
        details = "".join(f"<li>{_e(d)}</li>" for d in box.run.details)
        state = (
            f'<div class="frd-state" style="--s:{_e(look.colour)}"><p>'
            f'<span aria-hidden="true">{_e(look.sign)}</span> {_e(box.run.text)}</p>'
            + (f"<ul>{details}</ul>" if details else "")
            + "</div>"
        )
    return (
        f'<article class="frd-step" id="{scope}-{box.key}" data-step="{_e(box.step_id)}" '
        f'data-kind="{_e(box.kind)}" data-mark="{_e(box.mark.name)}" data-lane="{box.lane}"'
        f'{attrs} style="--k:{_e(box.mark.colour)}">'
        f'<div class="frd-kind">{picture_svg(box.mark)}<span>{_e(box.mark.label)}</span></div>'
        f'<h4 class="frd-title">{_e(box.title)}</h4>'
        + (f'<dl class="frd-facts">{facts}</dl>' if facts else "")
        + (_link(box.link, href) if box.link is not None else "")
        + state
        + "</article>"
    )


def _column(column: model.Column, scope: str, href: model.Href | None = None) -> str:
    state = f' data-state="{_e(column.state)}"' if column.state is not None else ""
    boxes = "".join(_box(b, scope, href) for b in column.boxes) or '<p class="frd-empty">—</p>'
    visits = f" · {column.visits}×" if column.visits > 1 else ""
    return (
        f'<section class="frd-cell frd-col" id="{scope}-{column.key}" '
        f'data-position="{column.position}" data-index="{column.index}"{state} '
        f'style="--at:{_cell(column.index)}" aria-label="Position {column.position}">'
        f'<h3 class="frd-pos">{column.position}{visits}</h3>{boxes}</section>'
    )


def _way(way: model.Way, picture: model.Picture) -> str:
    count = len(picture.columns)
    end = way.end_index(count)
    taken = " frd-way-taken" if way.taken else ""
    target = "end" if way.target is None else str(picture.columns[way.target].position)
    data = (
        f'data-from="{way.source}" data-to="{end}" data-target="{_e(target)}" '
        f'data-how="{way.how}" data-taken="{way.taken}"'
    )
    if way.how == "next":
        label = f"<span>{_e(way.label)}</span>" if way.label else ""
        return f'<div class="frd-next{taken}" {data} style="--at:{_gap_before(end)}">{label}</div>'
    low, high = sorted((way.source, end))
    words = f"{way.label} → {'end' if way.target is None else target}"
    fault = " frd-fault" if way.how == "fault" else ""
    return (
        f'<div class="frd-other{fault}{taken}" {data} data-track="{way.track}" '
        f'data-dir="{"back" if way.back else "forward"}" '
        f'style="--lo:{_centre(low)};--hi:{_centre(high)};--row:{way.track + 3}" '
        f'role="img" aria-label="{_e(words)}"><span>{_e(words)}</span></div>'
    )


def fragment(picture: model.Picture, href: model.Href | None = None) -> str:
    """The diagram as one ``<figure>`` holding its own style; ``href`` gives the
    addresses a subflow's box links to (none: it names them)."""
    scope = scope_of(picture)
    container = scope.replace("-", "_")
    caption = f"<strong>{_e(picture.flow_name)}</strong> starts {_e(picture.start)}."
    run = picture.run
    if run is not None:
        times = f" Started {_e(progress.when(run.started_at, run.zone))}." if run.started_at else ""
        if run.ended_at is not None:
            times += f" Ended {_e(progress.when(run.ended_at, run.zone))}."
        caption += f'<span class="frd-runline">{_e(run.sentence)}.{times}</span>'
    count = len(picture.columns)
    css = style.base() + style.narrow(scope, container, count)
    attrs = f'data-flow="{_e(picture.flow_name)}"'
    if run is not None:
        attrs += f' data-run="{run.id}" data-status="{_e(run.status)}"'
    if not count:
        body = '<p class="frd-empty">This flow has no steps.</p>'
    else:
        joined = any(w.below and w.target is None for w in picture.ways)
        cells = [
            '<div class="frd-cell frd-start" style="--at:1"><span>Start</span></div>',
            *(_column(c, scope, href) for c in picture.columns),
            f'<div class="frd-cell frd-end{" frd-joined" if joined else ""}" '
            f'style="--at:{_cell(count)}"><span>End</span></div>',
            *(_way(w, picture) for w in picture.ways),
        ]
        flat = " frd-flat" if picture.tracks == 0 else ""
        body = (
            f'<div class="frd-grid{flat}" style="--frd-cols:{count};'
            f'--frd-tracks:{max(1, picture.tracks)}">' + "".join(cells) + "</div>"
        )
    return (
        f'<figure class="frd" id="{scope}" {attrs} style="container:{container} / inline-size">'
        f"<style>{_minified(css)}</style>"
        f'<figcaption class="frd-caption">{caption}</figcaption>{body}</figure>'
    )


def document(picture: model.Picture, href: model.Href | None = None) -> str:
    """A whole HTML page holding the diagram, titled by the flow (and run)."""
    title = picture.flow_name + (f" — run {picture.run.id}" if picture.run is not None else "")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title>"
        "<style>body{margin:0;padding:8px;background:#fff}</style></head><body>"
        f"{fragment(picture, href)}</body></html>\n"
    )


def _minified(css: str) -> str:
    return re.sub(r"\n\s*", "", css.strip())
