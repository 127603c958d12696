"""Safe title templates: ``{number}: {message}`` filled from a record, nothing evaluated.

A notify rule's title is written by a developer but filled with values business users
and records control, so it is read with ``string.Formatter().parse`` and each
placeholder is looked up by name only: attribute and index access (``{x.__class__}``,
``{x[0]}``), conversions and format specs are never evaluated — such a placeholder is
left in the text literally. A missing name becomes empty text.

>>> render("{number}: {message}", {"number": "PO-7", "message": "approved"})
'PO-7: approved'
>>> render("{number.__class__} {{literal}}", {"number": 7})
'{number.__class__} {literal}'
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

_FORMATTER = string.Formatter()


def _plain_name(name: str) -> bool:
    # A plain field name is an identifier: no dots, brackets, or positional indexes.
    return name.isidentifier()


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _literal(name: str, conversion: str | None, spec: str | None) -> str:
    """The placeholder as it was written, for one we refuse to evaluate."""
    body = name
    if conversion:
        body += f"!{conversion}"
    if spec:
        body += f":{spec}"
    return "{" + body + "}"


def render(template: str, values: Mapping[str, Any]) -> str:
    """Fill ``{name}`` placeholders from ``values``; ``{{`` and ``}}`` are literal braces.

    A template that is not well formed (an unmatched brace) is returned with its
    braces as written rather than raising: a title is better shown odd than not at all.
    """
    try:
        parts = list(_FORMATTER.parse(template))
    except ValueError:
        return template
    out: list[str] = []
    for literal, name, spec, conversion in parts:
        out.append(literal)
        if name is None:
            continue
        if not _plain_name(name) or conversion or spec:
            out.append(_literal(name, conversion, spec))
            continue
        out.append(_text(values.get(name)))
    return "".join(out)


def placeholders(template: str) -> tuple[str, ...]:
    """The plain names a template reads, in order (for validating a notify rule)."""
    try:
        parts = list(_FORMATTER.parse(template))
    except ValueError:
        return ()
    return tuple(name for _, name, _, _ in parts if name is not None and _plain_name(name))
