"""The cost of a filter, bounded from CEL's own checked AST (the ``cel.expr.CheckedExpr`` the
compiler serialises), never from the source text.

Each node gets two bounds, linear in what the event brings (budget.Linear): the size of the
value it makes, in bytes, and the steps it takes. The rules that keep every bound linear:

- A loop (all, exists, exists_one -- CEL's comprehensions) costs its range's evaluation plus,
  per element, its body. Its body may use only its own variables (and ``type``, which is
  short): not ``payload``, not an enclosing loop's variable -- either would repeat a walk of
  something large once per element. So nested loops are fine when the inner one walks a part
  of the outer one's element (``payload.orders.all(o, o.lines.all(l, l.qty > 0))``).
- A loop whose accumulator grows (map, filter: CEL builds their lists by appending, measured
  quadratic in the runtime) or whose body costs in proportion to the accumulator is refused.
- Of two sizes multiplied (``contains``: the text times the needle), one must be a constant:
  a literal. Anything else is refused as unbounded.
- A ``matches`` pattern must be a literal: it is compiled when the filter is saved
  (patterns.py), and a search costs its text's bytes times the instructions RE2 compiled it to.
- A function Herald has no rule for is refused (none exists in the environment Herald builds;
  this keeps a future extension from slipping past).

Loops over a field of the payload (``payload.lines.all(...)``) are bounded by that field's
actual length, read from the event before evaluating; other sizes by the payload's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from app.programs.budget import PAYLOAD, Linear, Unbounded, larger, smaller
from app.programs.cel_ast import checked_pb2, syntax_pb2
from app.programs.patterns import SEARCH_STEP, Pattern, compiled

# Steps, calibrated on this machine's measurements of the CEL runtime (docs/benchmarks.md):
NODE = 30  # one node evaluated: a literal, a name, a field, an operator's dispatch (~20 ns)
ITERATION = 60  # one turn of a loop, beside its body's nodes (a turn of `x == 0`: 140 ns)
LITERAL_BYTE = 4  # comparing with a literal, or looking a field up: per byte of it
COMPARE_BYTE = 50  # comparing two values, per byte of the smaller (lists: ~220 ns an element)
COPY_BYTE = 10  # building a string or list, per byte (concatenation: 8 ns a byte)
SCAN_BYTE = 10  # contains: per byte of the text, per byte of the needle
COUNT_BYTE = 1  # size(): counting a string's characters
SCALAR_BYTES = 8  # a number, a boolean, null
# The payload made CEL's values, once an event, when a filter first reads it: the runtime takes
# all of it, whatever the filter reads (24-61 ns a byte measured, cold, by shape of payload).
CONVERT_BYTE = 64
TYPE_BYTES = 255  # the longest event type

_SIZED = {checked_pb2.Type.STRING, checked_pb2.Type.BYTES}
_ANY = checked_pb2.Type.ANY
ROOT = "herald"  # the container the variables live in (a bare ``type`` would be CEL's own)
VARIABLES = {f"{ROOT}.payload": "payload", f"{ROOT}.type": "type"}

_LOGIC = {"_&&_", "_||_", "!_", "@not_strictly_false"}
_COMPARE = {"_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_"}
_ARITHMETIC = {"_-_", "_*_", "_/_", "_%_", "-_"}
_CONVERT = {"int", "uint", "double", "string", "bytes", "bool", "dyn", "type", "duration"}
_CONVERT |= {"timestamp"}
_PREFIX = {"startsWith", "endsWith"}
MATCHES = "matches"
_TIME_PARTS = {
    "getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear",
    "getHours", "getMinutes", "getSeconds", "getMilliseconds",
}  # fmt: skip


@dataclass(frozen=True)
class Shape:
    size: Linear  # bytes of the value
    steps: Linear


@dataclass
class FilterCost:
    """A filter's bound: ``steps``, over ``payload`` and the fields in ``paths``: symbol
    ``size:<path>`` is that field's size in bytes, ``count:<path>`` its number of elements."""

    steps: Linear
    paths: dict[str, tuple[str, ...]] = field(default_factory=dict)
    reads_payload: bool = False  # then the event's payload is made CEL's, once (CONVERT_BYTE)
    patterns: dict[str, Pattern] = field(default_factory=dict)  # its matches(), compiled
    size: Linear = field(default_factory=Linear)  # a bound on the bytes of the value it gives


def cost_of(checked: checked_pb2.CheckedExpr) -> FilterCost:
    """The filter's bound; Unbounded, in words, when it has none."""
    walk = _Walk(checked.type_map)
    shape = walk.shape(checked.expr, _Scope.top())
    return FilterCost(shape.steps, walk.paths, walk.reads_payload, walk.patterns, shape.size)


@dataclass(frozen=True)
class _Scope:
    names: dict[str, Linear]  # what may be named here, and its size

    @staticmethod
    def top() -> _Scope:
        return _Scope({f"{ROOT}.payload": Linear.of(PAYLOAD), f"{ROOT}.type": Linear(TYPE_BYTES)})


class _Walk:
    def __init__(self, types: Mapping[int, checked_pb2.Type]) -> None:
        self.paths: dict[str, tuple[str, ...]] = {}
        self.reads_payload = False
        self.patterns: dict[str, Pattern] = {}
        self._types = types

    def shape(self, node: syntax_pb2.Expr, scope: _Scope) -> Shape:
        shape = self._shape(node, scope)
        if self.is_scalar(node):  # the checker knows it is a number, a boolean, a time
            return Shape(Linear(SCALAR_BYTES), shape.steps)
        return shape

    def is_scalar(self, node: syntax_pb2.Expr) -> bool:
        known = self._types.get(node.id)
        if known is None:
            return False
        kind = known.WhichOneof("type_kind")
        if kind == "primitive":
            return known.primitive not in _SIZED
        return kind in ("null", "well_known") and known.well_known != _ANY

    def _shape(self, node: syntax_pb2.Expr, scope: _Scope) -> Shape:
        kind = node.WhichOneof("expr_kind")
        if kind == "const_expr":
            return Shape(Linear(_constant_bytes(node.const_expr)), Linear(NODE))
        if kind == "ident_expr":
            return Shape(self._name(node.ident_expr.name, scope), Linear(NODE))
        if kind == "select_expr":
            return self._select(node, scope)
        if kind == "call_expr":
            return self._call(node, scope)
        if kind == "list_expr":
            elements = [self.shape(e, scope) for e in node.list_expr.elements]
            return Shape(
                sum((e.size for e in elements), Linear(SCALAR_BYTES)),
                sum((e.steps for e in elements), Linear(NODE)),
            )
        if kind == "struct_expr":
            return self._struct(node.struct_expr, scope)
        if kind == "comprehension_expr":
            return self._loop(node, scope)
        raise Unbounded("the filter holds an expression Herald does not know")

    def _name(self, name: str, scope: _Scope) -> Linear:
        self.reads_payload |= name == f"{ROOT}.payload"
        size = scope.names.get(name)
        if size is None:  # the checker has refused every name it does not know
            raise Unbounded(f"the filter names {name}, which Herald does not know")
        return size

    def _select(self, node: syntax_pb2.Expr, scope: _Scope) -> Shape:
        select = node.select_expr
        operand = self.shape(select.operand, scope)
        steps = operand.steps + NODE + LITERAL_BYTE * len(select.field.encode())
        if select.test_only:  # has(x.f)
            return Shape(Linear(SCALAR_BYTES), steps)
        path = _payload_path(node)
        return Shape(self._path_size(path) if path else operand.size, steps)

    def _path_size(self, path: tuple[str, ...]) -> Linear:
        name = _named(path)
        self.paths[name] = path
        return Linear.of(f"size:{name}")

    def _struct(self, struct: syntax_pb2.Expr.CreateStruct, scope: _Scope) -> Shape:
        if struct.message_name:
            raise Unbounded("a filter cannot build messages")
        size, steps = Linear(SCALAR_BYTES), Linear(NODE)
        for entry in struct.entries:
            key, value = self.shape(entry.map_key, scope), self.shape(entry.value, scope)
            size, steps = size + key.size + value.size, steps + key.steps + value.steps
            steps = steps + key.size.times(COMPARE_BYTE)  # hashing the key
        return Shape(size, steps)

    def _call(self, node: syntax_pb2.Expr, scope: _Scope) -> Shape:
        call = node.call_expr
        operands = [self.shape(call.target, scope)] if call.HasField("target") else []
        operands += [self.shape(a, scope) for a in call.args]
        steps = sum((o.steps for o in operands), Linear(NODE))
        sizes = [o.size for o in operands]
        work = self._work_to_a_scalar(node, sizes)
        if work is not None:
            return Shape(Linear(SCALAR_BYTES), steps + work)
        return _value_call(call.function, sizes, steps)

    def _work_to_a_scalar(self, node: syntax_pb2.Expr, sizes: list[Linear]) -> Linear | None:
        """What a call whose result is a scalar (a number, a bool...) does beyond computing
        its operands; None for a call whose result is another value."""
        function = node.call_expr.function
        if function in _LOGIC or function in _ARITHMETIC:
            return Linear()
        if function == "_+_" and self.is_scalar(node):  # numbers, durations, timestamps
            return Linear()
        if function in _TIME_PARTS:  # an optional time zone's name looked up
            return sum(sizes[1:], Linear()).times(COMPARE_BYTE)
        if function in _COMPARE or function in _PREFIX:
            return self._comparison(node, sizes)
        if function == "@in":  # an element against every element of a list, or a key hashed
            return (sizes[0] + sizes[1]).times(COMPARE_BYTE)
        if function == "size":
            return sizes[0].times(COUNT_BYTE)
        if function == "contains":
            why = (
                "contains() over two values that come from the event costs the product of "
                "their lengths: one of them must be a literal"
            )
            return sizes[0].product(sizes[1], why).times(SCAN_BYTE)
        if function == MATCHES:
            return sizes[0].times(SEARCH_STEP * self._pattern(node).instructions)
        return None

    def _pattern(self, node: syntax_pb2.Expr) -> Pattern:
        """The pattern of a ``matches`` call, compiled; PatternError when RE2 refuses it."""
        call = node.call_expr
        argument = call.args[0] if call.HasField("target") else call.args[1]
        if (
            argument.WhichOneof("expr_kind") != "const_expr"
            or argument.const_expr.WhichOneof("constant_kind") != "string_value"
        ):
            raise Unbounded(
                'a matches() pattern must be a literal string ("..."): it is compiled once, '
                "when the filter is saved, never from the event"
            )
        source = argument.const_expr.string_value
        pattern = self.patterns.get(source) or compiled(source)
        self.patterns[source] = pattern
        return pattern

    def _comparison(self, node: syntax_pb2.Expr, sizes: list[Linear]) -> Linear:
        """What comparing two values touches: a literal string or number at most its own
        bytes; two numbers nothing to speak of; anything else, element by element."""
        operands = [node.call_expr.target] if node.call_expr.HasField("target") else []
        operands += node.call_expr.args
        literals = [
            size
            for operand, size in zip(operands, sizes, strict=True)
            if operand.WhichOneof("expr_kind") == "const_expr"
        ]
        if literals:
            return min(literals, key=lambda size: size.constant).times(LITERAL_BYTE)
        if any(self.is_scalar(operand) for operand in operands):
            return Linear(SCALAR_BYTES * LITERAL_BYTE)
        return smaller(sizes[0], sizes[1]).times(COMPARE_BYTE)

    def _loop(self, node: syntax_pb2.Expr, scope: _Scope) -> Shape:
        loop = node.comprehension_expr
        over = self.shape(loop.iter_range, scope)
        path = _payload_path(loop.iter_range)
        # A field's length when the range is one; otherwise no more turns than half its
        # bytes (an element takes two at least: ``0,``).
        turns = self._path_count(path) if path else over.size.halved()
        # Symbols of this loop's own, so that an inner loop's never stand for an outer one's.
        element, accumulator = f"@element:{node.id}", f"@accumulator:{node.id}"
        inner = {**scope.names, loop.accu_var: Linear.of(accumulator)}
        inner[loop.iter_var] = Linear.of(element)
        if loop.iter_var2:
            inner[loop.iter_var2] = Linear.of(element)
        body = _Scope(inner)
        start = self.shape(loop.accu_init, scope)
        step = self.shape(loop.loop_step, body)
        condition = self.shape(loop.loop_condition, body)
        result = self.shape(loop.result, _Scope({**scope.names, **inner}))

        # The accumulator: at most its start, and then what each turn makes of it.
        growth = step.size.coefficient(accumulator)
        made = step.size.without([accumulator])  # what one turn adds to it, or makes anew
        if growth > 1:
            raise Unbounded("a loop whose result grows faster than its list cannot be bounded")
        if growth == 1:  # appended to: the start plus every turn's addition
            added = made.without([element]).product(turns, _NESTED)
            largest = start.size + added + over.size.times(made.coefficient(element))
        else:
            largest = larger(start.size, made.substitute(element, over.size))
        per_turn = step.steps + condition.steps
        if per_turn.coefficient(accumulator) and not largest.is_constant:
            raise Unbounded(
                "map and filter build a list one element at a time, which costs the square of "
                "its length: a filter uses all, exists or exists_one"
            )
        per_turn = per_turn.substitute(accumulator, largest)
        # Each turn's fixed part once per element; its part in the element's size summed over
        # the elements, which together are no larger than the range.
        fixed = per_turn.without([element])
        steps = over.steps + start.steps + result.steps.substitute(accumulator, largest)
        steps = steps + fixed.product(turns, _NESTED) + turns.times(ITERATION)
        steps = steps + over.size.times(per_turn.coefficient(element))  # sum of elements' sizes
        return Shape(result.size.substitute(accumulator, largest), steps)

    def _path_count(self, path: tuple[str, ...]) -> Linear:
        name = _named(path)
        self.paths[name] = path
        return Linear.of(f"count:{name}")


def _named(path: tuple[str, ...]) -> str:
    """A field's name in the bound's symbols: its names as a JSON list, so that a name holding
    a dot (``payload["a.b"].c``) is never taken for a path (``payload.a.b.c``)."""
    return json.dumps(path)


_NESTED = (
    "inside all, exists or exists_one, each turn may cost only what its own element does: a "
    "loop over the payload, or `in` over a list of it, inside a loop costs the square of the "
    "event's size"
)


def _payload_path(node: syntax_pb2.Expr) -> tuple[str, ...] | None:
    """``payload.a.b`` (or ``payload["a"].b``) as ("a", "b"); None for anything else."""
    fields: list[str] = []
    while True:
        kind = node.WhichOneof("expr_kind")
        if kind == "select_expr" and not node.select_expr.test_only:
            fields.append(node.select_expr.field)
            node = node.select_expr.operand
        elif kind == "call_expr" and node.call_expr.function == "_[_]":
            key = node.call_expr.args[1]
            if key.WhichOneof("expr_kind") != "const_expr":
                return None
            if key.const_expr.WhichOneof("constant_kind") != "string_value":
                return None
            fields.append(key.const_expr.string_value)
            node = node.call_expr.args[0]
        elif kind == "ident_expr" and node.ident_expr.name == f"{ROOT}.payload":
            return tuple(reversed(fields)) if fields else None
        else:
            return None


def _constant_bytes(constant: syntax_pb2.Constant) -> int:
    kind = constant.WhichOneof("constant_kind")
    if kind == "string_value":
        return max(len(constant.string_value.encode()), 1)
    if kind == "bytes_value":
        return max(len(constant.bytes_value), 1)
    return SCALAR_BYTES


def _value_call(function: str, sizes: list[Linear], steps: Linear) -> Shape:
    """A call whose result is a value made of its operands: its size, and the work of making
    it on top of ``steps``."""
    if function == "_+_":  # strings, bytes, lists: a copy of both
        total = sizes[0] + sizes[1]
        return Shape(total, steps + total.times(COPY_BYTE))
    if function == "_?_:_":
        return Shape(larger(sizes[1], sizes[2]), steps)
    if function == "_[_]":
        return Shape(sizes[0], steps + sizes[1].times(COMPARE_BYTE))
    if function in _CONVERT:
        return Shape(sizes[0], steps + sizes[0].times(COPY_BYTE))
    raise Unbounded(f"Herald has no cost for the function {function}")
