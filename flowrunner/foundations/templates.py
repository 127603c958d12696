"""Safe templates: ``{number}: {message}`` filled from a record, nothing evaluated.

A notify rule's title (written by a developer) and a notify step's message (written by
a business user) are filled with values records control, so a template is read with
``string.Formatter().parse`` and each placeholder is looked up by name only: attribute
and index access (``{x.__class__}``, ``{x[0]}``), conversions and format specs are never
evaluated. ``mistake`` says in a sentence why a template is not a safe one (the checks
at save time refuse it); ``render`` never raises and leaves such a placeholder in the
text literally. A missing name becomes empty text.

>>> render("{number}: {message}", {"number": "PO-7", "message": "approved"})
'PO-7: approved'
>>> render("{number.__class__} {{literal}}", {"number": 7})
'{number.__class__} {literal}'
>>> mistake("{number.__class__}")
'{number.__class__} is not a plain column name — write just {number}'
"""

from __future__ import annotations

import string
from collections.abc import Mapping

_FORMATTER = string.Formatter()


def _plain_name(name: str) -> bool:
    # A plain field name is an identifier: no dots, brackets, or positional indexes.
    return name.isidentifier()


def _text(value: object) -> str:
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


def render(template: str, values: Mapping[str, object]) -> str:
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
    """The plain names a template reads, in order (for validating a title or a message)."""
    try:
        parts = list(_FORMATTER.parse(template))
    except ValueError:
        return ()
    return tuple(name for _, name, _, _ in parts if name is not None and _plain_name(name))


def mistake(template: str) -> str | None:
    """Why ``template`` is not a safe template, in a sentence; None when it is one.

    A safe template has only plain names in its braces (``{number}``) and doubled
    braces for a brace itself. Whether each name is a column is for the caller to judge.

    >>> mistake("Order {number} is {status}"), mistake("{{braces}}")
    (None, None)
    >>> mistake("Order {number")
    'a brace has no partner — write {column} for a value, and {{ or }} for a brace itself'
    >>> mistake("{amount:>10}")
    '{amount:>10} is not a plain column name — write just {amount}'
    """
    try:
        parts = list(_FORMATTER.parse(template))
    except ValueError:
        return (
            "a brace has no partner — write {column} for a value, and {{ or }} for a brace itself"
        )
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if not name.strip():
            return "{} names no column — write a column's name in the braces, e.g. {number}"
        if not _plain_name(name) or conversion or spec:
            written = _literal(name, conversion, spec)
            return f"{written} is not a plain column name — write just {{{_example(name)}}}"
    return None


def _example(name: str) -> str:
    """The plain name a refused placeholder probably meant (``{amount:>10}`` → ``amount``)."""
    head = ""
    for char in name.strip():
        if not (char.isalnum() or char == "_"):
            break
        head += char
    return head if head.isidentifier() else "number"
