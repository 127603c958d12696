"""When a waiting step's condition holds: the record is watched, each answer is read.

A condition that reads only the record's columns (``status = withdrawn``) is tested
on every advance of the waiting step — the worker advances it whenever the record
changes — so it ends the wait as soon as the record makes it hold, at the moment the
run sees the change (``Turn.sees_record``), and the steps after it count from there.
A condition that reads the event (``event.decision = rejected``) is tested with each
event as it arrives. Between events, a condition that reads both holds only if the record alone
decides it: each ``event.<field>`` test counts as unknown (three-valued logic), so
``event.decision = rejected or status = withdrawn`` ends the wait once the order is
withdrawn, while ``event.decision = rejected and amount > 100`` waits for an answer
that says so. An answer is judged once, when it arrives; a later change of the record
does not read an old answer again.
"""

from __future__ import annotations

import functools
from datetime import datetime

from flowrunner import query
from flowrunner.foundations import shapes
from flowrunner.query import ast


def holds(
    condition: query.Condition,
    record: shapes.Payload,
    now: datetime,
    event: shapes.Payload | None = None,
) -> bool:
    """Whether ``condition`` ends the wait now: with an arriving ``event``, or without one.

    >>> c = query.parse("event.decision = rejected or status = withdrawn", event=True)
    >>> holds(c, {"status": "withdrawn"}, datetime(2026, 1, 1))
    True
    >>> holds(c, {"status": "open"}, datetime(2026, 1, 1))
    False
    """
    if event is not None:
        return condition.matches(record, now, event=event)
    if not condition.event_fields:
        return condition.matches(record, now)
    return _known(condition.node, record, now) is True


def _known(node: ast.Node, record: shapes.Payload, now: datetime) -> bool | None:
    """The node's truth over the record, ``None`` where it depends on an event field."""
    if isinstance(node, ast.And | ast.Or):
        # One false item decides an ``and``, one true item an ``or``, known or not the rest.
        decides = isinstance(node, ast.Or)
        unknown = False
        for item in node.items:
            value = _known(item, record, now)
            if value is decides:
                return decides
            unknown = unknown or value is None
        return None if unknown else not decides
    if isinstance(node, ast.Not):
        value = _known(node.item, record, now)
        return None if value is None else not value
    if node.left.scope != "record":
        return None
    return _atom(node, getattr(node, "ctype", None)).matches(record, now)


@functools.lru_cache(maxsize=1024)
def _atom(node: ast.Node, ctype: object) -> query.Condition:
    # One comparison compiled once. The type it compares as takes no part in a node's
    # equality, so it is part of the key: two bindings may type a column differently.
    return query.Condition(node)
