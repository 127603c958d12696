"""The Python evaluator: compiles a typed AST once into plain functions over a record.

The functions' body is the condition itself, built as a Python ``ast`` expression from
the AST nodes (never from the user's text): each literal is a constant or a name bound
in the functions' own namespace, each record value is read once with ``record.get(...)``.
The same body makes two functions: ``function(record, event, n)`` for ``evaluator`` and
``matches(record, now=None, event=None)``, which is ``Condition.matches`` itself.
Common cases (text equality, number comparisons) run inline; everything else goes
through ``_test``, which coerces the value to the compared type first. A value that is
null, missing, or not of the compared type makes a comparison false — except ``!=`` and
``not in``, which are the exact negations of ``=`` and ``in``.
"""

from __future__ import annotations

import ast as pyast
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from flowrunner.foundations import shapes
from flowrunner.query import ast, types

T = types.ColumnType

Evaluator = Callable[..., bool]

_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_PY_OPS: dict[str, pyast.cmpop] = {
    "=": pyast.Eq(),
    "<": pyast.Lt(),
    "<=": pyast.LtE(),
    ">": pyast.Gt(),
    ">=": pyast.GtE(),
}
# Classes whose values need no coercion for a type: compared as they are.
_FAST: dict[types.ColumnType, frozenset[type]] = {
    T.TEXT: frozenset({str}),
    # Not Decimal: a NaN would raise when compared; the slow path turns it into null.
    T.NUMBER: frozenset({int}),
}
EMPTY: shapes.Payload = {}


def _test(value: Any, ctype: types.ColumnType, op: str, expected: Any) -> bool:
    """The slow path of one comparison: coerce, then compare; null/mismatch is false."""
    value = types.coerce(value, ctype)
    if value is None:
        return False
    if op == "in":
        return bool(value in expected)
    if op == "contains":
        return bool(expected in value)
    if op == "starts with":
        return bool(value.startswith(expected))
    return _ORDER[op](value, expected)


def _const(value: Any, namespace: dict[str, Any]) -> pyast.expr:
    if value is None or type(value) in (str, int, bool):
        return pyast.Constant(value)
    name = f"_k{len(namespace)}"
    namespace[name] = value
    return pyast.Name(name, pyast.Load())


def _call(func: str, *args: pyast.expr) -> pyast.expr:
    return pyast.Call(pyast.Name(func, pyast.Load()), list(args), [])


class _Compiler:
    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {"_test": _test, "_EMPTY": EMPTY}
        self.relatives: list[tuple[ast.Relative, types.ColumnType]] = []
        self.reads_event = False
        self.temps = 0

    def expr(self, node: ast.Node) -> pyast.expr:
        if isinstance(node, ast.And):
            return pyast.BoolOp(pyast.And(), [self.expr(i) for i in node.items])
        if isinstance(node, ast.Or):
            return pyast.BoolOp(pyast.Or(), [self.expr(i) for i in node.items])
        if isinstance(node, ast.Not):
            return pyast.UnaryOp(pyast.Not(), self.expr(node.item))
        if isinstance(node, ast.IsNull):
            op: pyast.cmpop = pyast.IsNot() if node.negated else pyast.Is()
            return pyast.Compare(self.read(node.left), [op], [pyast.Constant(None)])
        if isinstance(node, ast.In):
            assert node.ctype is not None
            members = frozenset(types.coerce(v.value, node.ctype) for v in node.values)
            test = self.test(node.left, node.ctype, "in", _const(members, self.namespace))
            return pyast.UnaryOp(pyast.Not(), test) if node.negated else test
        assert node.ctype is not None
        expected = self.value(node.right, node.ctype)
        if node.op == "!=":
            return pyast.UnaryOp(pyast.Not(), self.test(node.left, node.ctype, "=", expected))
        return self.test(node.left, node.ctype, node.op, expected)

    def read(self, ref: ast.Ref) -> pyast.expr:
        source = "record" if ref.scope == "record" else "event"
        self.reads_event = self.reads_event or source == "event"
        get = pyast.Attribute(pyast.Name(source, pyast.Load()), "get", pyast.Load())
        return pyast.Call(get, [pyast.Constant(ref.name)], [])

    def value(self, value: ast.ValueExpr, ctype: types.ColumnType) -> pyast.expr:
        if isinstance(value, ast.Literal):
            return _const(types.coerce(value.value, ctype), self.namespace)
        self.relatives.append((value, ctype))
        index = pyast.Constant(len(self.relatives) - 1)
        return pyast.Subscript(pyast.Name("n", pyast.Load()), index, pyast.Load())

    def test(
        self, ref: ast.Ref, ctype: types.ColumnType, op: str, expected: pyast.expr
    ) -> pyast.expr:
        if ctype is T.TEXT and op == "=":
            # Text equality needs no coercion: `==` with a str is already false for null,
            # for every other type, and true for a str subclass with the same text.
            return pyast.Compare(self.read(ref), [pyast.Eq()], [expected])
        kind = _const(ctype, self.namespace)
        fast_classes = _FAST.get(ctype)
        if fast_classes is None:
            return _call("_test", self.read(ref), kind, pyast.Constant(op), expected)
        # `(fast if (v := r.get(name)).__class__ in FAST else _test(v, ...))`: one dict
        # lookup and one class check before the comparison itself.
        temp = f"_v{self.temps}"
        self.temps += 1
        bound = pyast.NamedExpr(pyast.Name(temp, pyast.Store()), self.read(ref))
        value = pyast.Name(temp, pyast.Load())
        if len(fast_classes) == 1:
            (cls,) = fast_classes
            guard: pyast.expr = pyast.Compare(
                pyast.Attribute(bound, "__class__", pyast.Load()),
                [pyast.Is()],
                [pyast.Name(cls.__name__, pyast.Load())],
            )
            self.namespace[cls.__name__] = cls
        else:
            guard = pyast.Compare(
                pyast.Attribute(bound, "__class__", pyast.Load()),
                [pyast.In()],
                [_const(fast_classes, self.namespace)],
            )
        fast: pyast.expr
        if op == "in":
            fast = pyast.Compare(value, [pyast.In()], [expected])
        elif op == "contains":
            fast = pyast.Compare(expected, [pyast.In()], [value])
        elif op == "starts with":
            method = pyast.Attribute(value, "startswith", pyast.Load())
            fast = pyast.Call(method, [expected], [])
        else:
            fast = pyast.Compare(value, [_PY_OPS[op]], [expected])
        slow = _call("_test", value, kind, pyast.Constant(op), expected)
        return pyast.IfExp(guard, fast, slow)


def _name(name: str) -> pyast.Name:
    return pyast.Name(name, pyast.Load())


def _assign(name: str, value: pyast.expr) -> pyast.stmt:
    return pyast.Assign([pyast.Name(name, pyast.Store())], value)


def _arguments(names: list[str], defaults: list[pyast.expr]) -> pyast.arguments:
    return pyast.arguments(
        posonlyargs=[],
        args=[pyast.arg(name) for name in names],
        kwonlyargs=[],
        kw_defaults=[],
        defaults=defaults,
    )


class Compiled:
    """A condition compiled to ``function(record, event=..., n=...)`` and ``matches``.

    ``function`` takes the event and the resolved relative values (``resolve``) as they
    are, for ``evaluator``; ``matches(record, now=None, event=None)`` does both itself,
    and only where the condition needs them, so a condition without ``now()`` or
    ``event.`` costs one call of its body.
    """

    def __init__(self, node: ast.Node) -> None:
        compiler = _Compiler()
        body = compiler.expr(node)
        self.relatives = tuple(compiler.relatives)
        namespace = dict(compiler.namespace, __builtins__={}, _resolve=self.resolve)

        function = pyast.Lambda(
            _arguments(["record", "event", "n"], [_name("_EMPTY"), pyast.Tuple([], pyast.Load())]),
            body,
        )
        # The prologue of `matches` is what `evaluator` does once for many records.
        prologue: list[pyast.stmt] = []
        if compiler.reads_event:
            empty = pyast.BoolOp(pyast.Or(), [_name("event"), _name("_EMPTY")])
            prologue.append(_assign("event", empty))
        if self.relatives:
            prologue.append(_assign("n", pyast.Call(_name("_resolve"), [_name("now")], [])))
        matches = pyast.FunctionDef(
            name="matches",
            args=_arguments(["record", "now", "event"], [pyast.Constant(None)] * 2),
            body=[*prologue, pyast.Return(body)],
            decorator_list=[],
        )
        tree = pyast.Module([_assign("function", function), matches], [])
        pyast.fix_missing_locations(tree)
        exec(compile(tree, "<condition>", "exec"), namespace)
        self.function: Evaluator = namespace["function"]
        self.matches: Evaluator = namespace["matches"]

    def resolve(self, now: datetime | None) -> tuple[types.Compared, ...]:
        """The values of the condition's ``now()`` and ``today()`` at ``now`` (default: now)."""
        at = now or datetime.now(UTC)
        # A value past an end of the calendar is ``types.Beyond``, which orders after (or
        # before) every date: the comparison is decided, as the SQL builder decides it.
        return tuple(types.coerce(rel.bounded(at), ctype) for rel, ctype in self.relatives)
