"""No loop without a pause: the graph of a flow's positions, and its loops that never wait.

A run goes through a flow's positions from the smallest up. Every position leads to
the next one (a branch whose condition holds goes on too), and a branch whose condition
does not hold jumps to its ``goto``, forwards or back. Steps sharing a position are
lanes that join before the run leaves it, so a position *waits* when any of its steps
waits (``wait``, ``until``, ``waitFor``, or an application kind that waits for an
event): the join waits for that lane, whatever the other lanes do.

A step that runs a command may also name a *fault path*, its ``on_failure``: when the
command fails for good the run leaves the position there at once, without the join —
so a fault edge leaves a position that waits as well, and passes no pause on its way.

A loop is a path through positions that comes back to where it started. ``find`` gives
every group of positions that can loop without passing a position that waits: such a
flow would run its steps again and again without ever pausing, until the run-time
loop bound stops it. Validation (``flowrunner.flows.validation``) refuses it at save, at
import and when a run's snapshot is loaded.

>>> points = {1: Point(), 2: Point(goto=1)}
>>> [loop.sentence([1, 2]) for loop in find(points)]
['positions 1–2 loop with nothing that waits']
>>> find({1: Point(waits=True), 2: Point(goto=1)})
[]
>>> [loop.positions for loop in find({1: Point(waits=True, faults=(2,)), 2: Point(goto=1)})]
[(1, 2)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from flowrunner import binding as binding_mod

# The built-in kinds whose steps wait (a subflow waits for its child run to end); an
# application kind waits when it has wait_for.
WAITING_KINDS = frozenset({"wait", "until", "waitFor", "subflow"})


def waits(binding: binding_mod.FlowBinding, kind: binding_mod.StepKind | None) -> bool:
    """Whether a step of ``kind`` (canonically spelled) waits before the run goes on.

    A kind the binding does not know counts as waiting: its step is refused for its
    kind already, and one problem is enough.
    """
    if kind is None:
        return True
    if kind in WAITING_KINDS:
        return True
    if kind in binding_mod.BUILTIN_KINDS:
        return False
    app = binding.kinds.get(kind)
    return app is None or app.waits


@dataclass(frozen=True)
class Point:
    """One position of a flow: whether it waits, where a branch there may jump, and where
    its steps' fault paths go (``on_failure``)."""

    waits: bool = False
    goto: int | None = None
    faults: tuple[int, ...] = ()


@dataclass(frozen=True)
class Loop:
    """Positions that can loop without waiting, smallest first."""

    positions: tuple[int, ...]

    def closes(self, position: int, goto: int | None) -> bool:
        """Whether a jump at ``position`` to ``goto`` (a branch's, or a fault path's) goes
        back inside this loop."""
        return goto is not None and goto <= position and {position, goto} <= set(self.positions)

    def spans(self, position: int) -> bool:
        """Whether ``position`` lies between the loop's first and last positions."""
        return self.positions[0] <= position <= self.positions[-1]

    def sentence(self, order: Sequence[int]) -> str:
        """``positions 1–3 loop with nothing that waits``; ``order``: the flow's positions."""
        if len(self.positions) == 1:
            return f"position {self.positions[0]} goes to itself with nothing that waits"
        return f"{self.named(order)} loop with nothing that waits"

    def named(self, order: Sequence[int]) -> str:
        """``positions 1–3`` when they follow each other in the flow, else ``positions 1,
        3 and 5``."""
        first, last = self.positions[0], self.positions[-1]
        between = [p for p in order if first <= p <= last]
        if between == list(self.positions):
            return f"positions {first}–{last}"
        *head, tail = (str(p) for p in self.positions)
        return f"positions {', '.join(head)} and {tail}"


def find(points: Mapping[int, Point]) -> list[Loop]:
    """Every loop of the flow that passes no position that waits, by first position.

    A position that waits is left only after its wait — but for its fault paths, which
    leave it at once: it keeps those edges alone. What still has a cycle (a strongly
    connected group of two or more positions, or a jump to its own position) loops
    without pausing.
    """
    order = sorted(points)
    edges: dict[int, list[int]] = {}
    for index, position in enumerate(order):
        point = points[position]
        targets = []
        if not point.waits:
            if index + 1 < len(order):
                targets.append(order[index + 1])
            if point.goto is not None and point.goto in points:
                targets.append(point.goto)
        targets += [t for t in point.faults if t in points]
        edges[position] = list(dict.fromkeys(targets))
    loops = [
        Loop(tuple(sorted(group)))
        for group in _groups(edges)
        if len(group) > 1 or group[0] in edges[group[0]]
    ]
    return sorted(loops, key=lambda loop: loop.positions)


def _groups(edges: Mapping[int, list[int]]) -> list[list[int]]:
    """The strongly connected groups of the graph (Tarjan's algorithm, without recursion)."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    groups: list[list[int]] = []
    for root in edges:
        if root in index:
            continue
        work: list[tuple[int, int]] = [(root, 0)]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, next_edge = work[-1]
            targets = edges[node]
            if next_edge < len(targets):
                work[-1] = (node, next_edge + 1)
                target = targets[next_edge]
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                groups.append(group)
    return groups
