"""The dashboard's charts as SVG drawn on the server: no script, no library, every text
escaped. Each scales to its container (a ``viewBox`` and ``width: 100%``), so it reads
at 390 px as at 1280; each has a title and a description for screen readers, and the
page shows its figures as a table beneath it.

>>> svg = per_day_chart(["1 Mar", "2 Mar"], [3, 0], [1, 2], title="Runs <per> day")
>>> svg.count('class="bar started"'), svg.count('class="bar ended"'), "&lt;per&gt;" in svg
(1, 2, True)
"""

from __future__ import annotations

import html
from collections.abc import Sequence

WIDTH = 480
STARTED = "#2563eb"
ENDED = "#15803d"
LATE = "#b45309"
FAILED = "#b91c1c"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _frame(width: int, height: int, title: str, description: str, body: str, name: str) -> str:
    return (
        f'<svg class="chart" data-chart="{_e(name)}" viewBox="0 0 {width} {height}" '
        f'width="100%" role="img" aria-labelledby="{_e(name)}-t {_e(name)}-d" '
        f'preserveAspectRatio="xMidYMid meet" xmlns="http://www.w3.org/2000/svg">'
        f'<title id="{_e(name)}-t">{_e(title)}</title>'
        f'<desc id="{_e(name)}-d">{_e(description)}</desc>{body}</svg>'
    )


def _scale(highest: float) -> float:
    """A round top for an axis at or above ``highest``."""
    if highest <= 0:
        return 1.0
    step = float(10 ** len(str(int(highest)))) / 10
    for factor in (1, 2, 2.5, 5, 10):
        if highest <= step * factor:
            return step * factor
    return highest


def per_day_chart(
    labels: Sequence[str],
    started: Sequence[int],
    ended: Sequence[int],
    *,
    title: str,
    name: str = "per-day",
) -> str:
    """Paired bars per day: runs started (blue) and ended (green). A day without a run
    draws no bar; every fifth day is labelled under the axis."""
    height, left, bottom, top = 240, 44, 40, 16
    days = len(labels)
    top_value = _scale(max([*started, *ended, 0]))
    plot_w, plot_h = WIDTH - left - 8, height - top - bottom
    slot = plot_w / max(days, 1)
    bar = max(1.0, slot * 0.4)
    parts = []
    for tick in (0, top_value / 2, top_value):
        y = top + plot_h - plot_h * tick / top_value
        parts.append(
            f'<line x1="{left}" x2="{WIDTH - 8}" y1="{y:.1f}" y2="{y:.1f}" stroke="#d1d5db"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="14" '
            f'fill="#374151">{_e(_number(tick))}</text>'
        )
    for index, label in enumerate(labels):
        x = left + slot * index + slot * 0.1
        for offset, kind, count, colour in (
            (0.0, "started", started[index], STARTED),
            (bar, "ended", ended[index], ENDED),
        ):
            if not count:
                continue
            h = plot_h * count / top_value
            parts.append(
                f'<rect class="bar {kind}" data-day="{_e(label)}" data-count="{count}" '
                f'x="{x + offset:.1f}" y="{top + plot_h - h:.1f}" width="{bar:.1f}" '
                f'height="{h:.1f}" fill="{colour}"><title>{_e(label)}: {count} {kind}'
                "</title></rect>"
            )
        if index % 5 == 0 or index == days - 1:
            last = index == days - 1  # the last day's label ends at the chart's edge
            at, anchor = (WIDTH - 8, "end") if last else (x + bar, "middle")
            parts.append(
                f'<text x="{at:.1f}" y="{height - bottom + 16}" text-anchor="{anchor}" '
                f'font-size="14" fill="#374151">{_e(label)}</text>'
            )
    parts.append(_legend(left, height - 8, (("started", STARTED), ("ended", ENDED))))
    description = (
        f"{sum(started)} runs started and {sum(ended)} ended over {days} days; "
        "the table below holds each day's figures."
    )
    return _frame(WIDTH, height, title, description, "".join(parts), name)


def _legend(x: float, y: float, keys: Sequence[tuple[str, str]]) -> str:
    parts = []
    for word, colour in keys:
        parts.append(
            f'<rect x="{x:.1f}" y="{y - 10}" width="10" height="10" fill="{colour}"/>'
            f'<text x="{x + 14:.1f}" y="{y}" font-size="14" fill="#111827">{_e(word)}</text>'
        )
        x += 26 + 9 * len(word)
    return "".join(parts)


def bars_chart(
    rows: Sequence[tuple[str, Sequence[float]]],
    keys: Sequence[tuple[str, str]],
    *,
    title: str,
    name: str,
    shown: Sequence[Sequence[str]] | None = None,
) -> str:
    """Horizontal bars, one group per row (its label above its bars), one bar per key
    (``(word, colour)``); ``shown`` gives each value's words at the bar's end."""
    bar_h, gap, label_h = 16, 4, 20
    group = label_h + len(keys) * (bar_h + gap) + 8
    height = max(60, len(rows) * group + 30)
    left, right = 8, WIDTH - 90
    top_value = _scale(max([v for _, values in rows for v in values] or [0]))
    parts = []
    y = 4.0
    for index, (label, values) in enumerate(rows):
        parts.append(
            f'<text x="{left}" y="{y + 15:.1f}" font-size="15" fill="#111827">{_e(label)}</text>'
        )
        y += label_h
        for at, ((word, colour), value) in enumerate(zip(keys, values, strict=True)):
            w = (right - left) * value / top_value
            words = shown[index][at] if shown is not None else _number(value)
            parts.append(
                f'<rect class="bar {_e(word)}" data-row="{_e(label)}" data-value="{value}" '
                f'x="{left}" y="{y:.1f}" width="{w:.1f}" height="{bar_h}" fill="{colour}">'
                f"<title>{_e(label)}: {_e(word)} {_e(words)}</title></rect>"
                f'<text x="{left + w + 4:.1f}" y="{y + 13:.1f}" font-size="14" '
                f'fill="#374151">{_e(words)}</text>'
            )
            y += bar_h + gap
        y += 8
    parts.append(_legend(left, height - 6, keys))
    description = f"{len(rows)} rows; the table below holds the figures."
    return _frame(WIDTH, height, title, description, "".join(parts), name)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"
