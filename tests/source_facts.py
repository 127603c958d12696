"""What flowrunner's source says, read from its syntax trees: its modules, what each
imports, the circles among them, the private names one module reaches in another, and
the clocks it reads.

``test_architecture.py`` holds the rules and their exceptions; this module only reads.
"""

from __future__ import annotations

import ast
import functools
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

import flowrunner

PACKAGE = Path(flowrunner.__file__).parent

# Every module file of the package, migrations included.
MODULES = sorted(PACKAGE.rglob("*.py"))


def module_name(path: Path) -> str:
    """``flowrunner/flows/rows.py`` -> ``flowrunner.flows.rows``; a package by its own name."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def relative(path: Path) -> str:
    """A module file as the repository names it: ``flowrunner/flows/rows.py``."""
    return path.relative_to(PACKAGE.parent).as_posix()


NAMES = frozenset(module_name(path) for path in MODULES)


def is_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module or package of flowrunner."""
    return dotted in NAMES


@functools.cache
def parsed(source: str) -> ast.Module:
    """``source``'s syntax tree, parsed once a process: the rules walk every module's
    tree several times (the trees are only read, never changed)."""
    return ast.parse(source)


def tree(path: Path) -> ast.Module:
    return parsed(path.read_text(encoding="utf-8"))


# -- imports ---------------------------------------------------------------------------


def _absolute(node: ast.ImportFrom, importer: str, package: bool) -> str:
    """The module a ``from … import`` reads from, a relative one made absolute."""
    if not node.level:
        return node.module or ""
    base = importer.split(".") if package else importer.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


@functools.cache
def imports(path: Path) -> frozenset[str]:
    """Every name ``path`` imports, wherever the import stands: at the top, inside a
    function, under ``if TYPE_CHECKING:``.

    ``from package import module`` imports the module (and runs the package's
    ``__init__``, which the package's own layer answers for); ``from module import
    name`` imports the module, and ``module.name`` is listed too, so that a rule can
    name ``time.monotonic``.
    """
    importer = module_name(path)
    found: set[str] = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node, importer, path.name == "__init__.py")
            if not source:
                continue
            names = [f"{source}.{alias.name}" for alias in node.names]
            modules = [name for name in names if is_module(name)]
            found.update(modules)
            if len(modules) < len(names) or not source.startswith("flowrunner"):
                found.add(source)
            found.update(names)
    return frozenset(found)


def graph(paths: Iterable[Path] = MODULES) -> dict[str, set[str]]:
    """Each module -> the modules of flowrunner it imports (itself left out).

    A package's ``__init__`` counts only when something is taken from it by name:
    importing ``flowrunner.flows.rows`` runs ``flowrunner/flows/__init__.py`` too, but
    Python finishes a package before its modules, so that makes no circle.
    """
    return {
        module_name(path): {name for name in imports(path) if is_module(name)} - {module_name(path)}
        for path in paths
    }


def circles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The groups of modules that import one another round a circle (each group a
    strongly connected component of more than one module), each sorted, smallest first.

    >>> circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    [['a', 'b', 'c']]
    >>> circles({"a": {"b"}, "b": set()})
    []
    """
    # Tarjan's algorithm, without recursion: the package's chains are deep.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, ahead = work[-1]
            following = next(ahead, None)
            if following is not None:
                if following not in index:
                    index[following] = low[following] = len(index)
                    stack.append(following)
                    on_stack.add(following)
                    work.append((following, iter(sorted(edges.get(following, ())))))
                elif following in on_stack:
                    low[node] = min(low[node], index[following])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found, key=lambda group: (len(group), group))


def way_round(edges: Mapping[str, Iterable[str]], group: list[str]) -> list[str]:
    """One shortest circle through the group's first module, as the imports go.

    >>> way_round({"a": {"b"}, "b": {"c", "a"}, "c": {"a"}}, ["a", "b", "c"])
    ['a', 'b', 'a']
    """
    start, members = group[0], set(group)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for following in sorted(edges.get(node, ())):
            if following == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if following in members and following not in came_from:
                came_from[following] = node
                queue.append(following)
    raise ValueError(f"{group} is not a circle")


# -- names as the source spells them ---------------------------------------------------


def aliases(module: ast.AST) -> dict[str, str]:
    """Local name -> the dotted name it was imported as (``sa`` -> ``sqlalchemy``)."""
    found: dict[str, str] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                found[alias.asname or root] = alias.name if alias.asname else root
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return found


def dotted(node: ast.expr, names: Mapping[str, str]) -> str | None:
    """``sa.func.count`` -> ``sqlalchemy.func.count``; None for what is not a dotted name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([names.get(node.id, node.id), *reversed(parts)])


# -- clocks ------------------------------------------------------------------------------

# The wall clock and the process's clocks, by the names they are imported from.
CLOCKS = frozenset(
    {
        "datetime.datetime.now",
        "datetime.datetime.utcnow",
        "datetime.datetime.today",
        "datetime.date.today",
        "time.time",
        "time.time_ns",
        "time.monotonic",
        "time.monotonic_ns",
        "time.perf_counter",
        "time.perf_counter_ns",
    }
)


@functools.cache
def clock_reads(source: str) -> tuple[tuple[int, str], ...]:
    """Where ``source`` reads a clock or hands one on (a call or a mere reference): each
    line with the clock's full name.

    >>> clock_reads("from datetime import UTC, datetime\\nnow = datetime.now(UTC)")
    ((2, 'datetime.datetime.now'),)
    >>> clock_reads("import time as t\\nstarted = t.monotonic")
    ((2, 'time.monotonic'),)
    >>> clock_reads("from time import perf_counter")
    ((1, 'time.perf_counter'),)
    >>> clock_reads("def f(now):\\n    return now.replace(tzinfo=None)")
    ()
    """
    module = parsed(source)
    names = aliases(module)
    found: set[tuple[int, str]] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.ImportFrom) and node.module in ("time", "datetime"):
            for alias in node.names:
                if f"{node.module}.{alias.name}" in CLOCKS:
                    found.add((node.lineno, f"{node.module}.{alias.name}"))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            name = dotted(node, names)
            if name in CLOCKS:
                found.add((node.lineno, name))
    return tuple(sorted(found))


# -- private names ---------------------------------------------------------------------


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def own_names(module: ast.AST) -> set[str]:
    """The private names the module's own classes define: in a class's body (methods,
    class attributes, fields, ``__slots__``) or assigned on ``self`` or ``cls``
    (``self._x = …``, ``object.__setattr__(self, "_x", …)``). Reaching these on any
    object is the module's own business: another instance of its class, a descriptor's
    instance. (Its top-level ``_functions`` do not count: a module reaches those by
    their bare names, never as another object's attribute.)

    >>> sorted(own_names(ast.parse(
    ...     "def _helper(): ...\\n"
    ...     "class A:\\n    _kind = 1\\n    __slots__ = ('_a',)\\n"
    ...     "    def _b(self):\\n        self._c = 1\\n        other._d = 2")))
    ['_a', '_b', '_c', '_kind']
    """
    found: set[str] = set()

    def bind(target: ast.expr, in_class: bool) -> None:
        if in_class and isinstance(target, ast.Name):
            found.add(target.id)
        elif isinstance(target, ast.Attribute) and _on_self(target.value):
            found.add(target.attr)
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                bind(element, in_class)

    for node in ast.walk(module):
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    found.add(member.name)
                elif isinstance(member, ast.Assign | ast.AnnAssign):
                    targets = member.targets if isinstance(member, ast.Assign) else [member.target]
                    for target in targets:
                        bind(target, in_class=True)
                    slots = any(isinstance(t, ast.Name) and t.id == "__slots__" for t in targets)
                    if slots and member.value is not None:
                        found.update(
                            c.value
                            for c in ast.walk(member.value)
                            if isinstance(c, ast.Constant) and isinstance(c.value, str)
                        )
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                bind(target, in_class=False)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            bind(node.target, in_class=False)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "__setattr__"
            and len(node.args) >= 2
            and _on_self(node.args[0])
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            found.add(node.args[1].value)
    return {name for name in found if _private(name)}


def _on_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


class Reach(NamedTuple):
    """A private name reached: where, how it is written, and the name."""

    line: int
    text: str
    name: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.text}"


@functools.cache
def private_uses(source: str) -> tuple[Reach, ...]:
    """Where ``source`` reaches a private name (one leading underscore) that is not its
    own:

    - ``from flowrunner.x import _name``;
    - ``thing._name`` on what it imported (a module, flowrunner's or any other; a class);
    - ``thing._name`` on anything but ``self`` and ``cls``, unless one of the module's
      own classes defines ``_name`` (``own_names``).

    >>> [str(r) for r in private_uses("def f(runner):\\n    return runner._need_tenant(1)")]
    ['line 2: runner._need_tenant']
    >>> private_uses("from flowrunner.store.runs import _run")
    (Reach(line=1, text='from flowrunner.store.runs import _run', name='_run'),)
    >>> private_uses("from flowrunner.query import evaluate\\nx = evaluate._EMPTY")[0].text
    'evaluate._EMPTY'
    >>> private_uses("class A:\\n    def __init__(self):\\n        self._x = 1\\n"
    ...              "    def __eq__(self, other):\\n        return self._x == other._x")
    ()
    """
    module = parsed(source)
    mine = own_names(module)
    # What an import binds is never the module's own, whatever names it defines.
    imported: set[str] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                imported.add(alias.asname or alias.name.split(".")[0])
    found: list[Reach] = []
    for node in ast.walk(module):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("flowrunner"):
            for alias in node.names:
                if _private(alias.name):
                    text = f"from {node.module} import {alias.name}"
                    found.append(Reach(node.lineno, text, alias.name))
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            owner = node.value
            if _on_self(owner):
                continue
            if node.attr not in mine or (isinstance(owner, ast.Name) and owner.id in imported):
                found.append(Reach(node.lineno, f"{ast.unparse(owner)}.{node.attr}", node.attr))
    return tuple(sorted(found))
