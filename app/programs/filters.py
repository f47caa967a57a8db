"""Endpoint filters: Common Expression Language over an event -- ``type`` (its event type) and
``payload`` (the payload as accepted) -- for example
``payload.amount > 100 && payload.currency == "EUR"``.

A filter is compiled and type-checked when the endpoint is saved (a 422 says where it is wrong
or why it costs too much), cached compiled, and evaluated at fan-out. What it builds is built
then: its ``matches`` patterns are compiled once (patterns.py) and its calls to CEL's own
``matches``, which would compile the pattern again on every call, are rewritten to search with
them. Its cost is bounded from
the checked AST (filter_cost.py) and worked out for each event before it runs (``Events``): one
that could exceed its budget on this event is not run -- the endpoint is passed by, with the
reason, and ``herald_program_budget_exceeded_total{program="filter"}`` counts it. The runtime's
own cap on a loop's turns (10,000 an evaluation) stands behind the bound.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import cel_expr_python.cel as cel
from google.protobuf import any_pb2

from app.core.caches import SharedCache
from app.core.metrics import PROGRAM_BUDGET_EXCEEDED
from app.programs.budget import (
    FILTERS_PER_TENANT,
    PAYLOAD,
    REFERENCE_PAYLOAD_BYTES,
    STEPS_PER_EVALUATION,
    STEPS_PER_EVENT,
    Unbounded,
)
from app.programs.cel_ast import checked_pb2
from app.programs.filter_cost import (
    CONVERT_BYTE,
    MATCHES,
    ROOT,
    FilterCost,
    cost_of,
)
from app.programs.patterns import PatternError, search

MAX_LENGTH = 1000
# What a filter's ``matches`` calls become. A tenant naming it is refused by the cost walk,
# which has no rule for it.
_SEARCH = f"{ROOT}.compiled_matches"
_SEARCH_OVERLOAD = "herald_compiled_matches_string_string"
_ENVIRONMENT = cel.NewEnv(
    container=ROOT,
    variables={f"{ROOT}.payload": cel.Type.DYN, f"{ROOT}.type": cel.Type.STRING},
    functions=[
        cel.FunctionDecl(
            _SEARCH,
            [
                cel.Overload(
                    _SEARCH_OVERLOAD,
                    return_type=cel.Type.BOOL,
                    parameters=[cel.Type.STRING, cel.Type.STRING],
                    impl=search,
                )
            ],
        )
    ],
)
_POSITION = re.compile(r"<input>:(\d+):(\d+): (?:Syntax error: )?([^\n]*)")
_UNDECLARED = re.compile(r"undeclared reference to '([^']*)'")


class FilterError(ValueError):
    """Why a filter cannot be saved, in words (it names the position of a syntax error)."""


@dataclass(frozen=True)
class Filter:
    expression: Any  # cel.Expression
    cost: FilterCost


# A process's compiled filters, each tenant with a share (app/core/caches.py): compiling one costs
# 1-8 ms (the checker, the cost walk, the runtime's plan), so one tenant's many filters must
# never push out another's. A tenant has at most FILTERS_PER_TENANT distinct filters (the
# endpoints service refuses more), so its share holds all of them.
_COMPILED: SharedCache[tuple[str, str], Filter | FilterError] = SharedCache(
    per_tenant=FILTERS_PER_TENANT, total=50_000
)


def cached(tenant_id: str, source: str) -> Filter:
    """The tenant's filter compiled, once per process while it stays in the tenant's share."""
    program = _COMPILED.get((tenant_id, source))
    if program is None:
        try:
            program = compiled(source)
        except FilterError as exc:  # saved under older rules: kept refused, not recompiled
            program = exc
        _COMPILED.put(tenant_id, (tenant_id, source), program)
    if isinstance(program, FilterError):
        raise program
    return program


def compiled(source: str) -> Filter:
    """The filter compiled; FilterError if it is not a filter Herald runs."""
    if len(source) > MAX_LENGTH:
        raise FilterError(f"a filter is at most {MAX_LENGTH} characters")
    try:
        expression = _ENVIRONMENT.compile(source)
    except RuntimeError as exc:
        raise FilterError(_compile_error(str(exc))) from None
    returns = expression.return_type()
    if returns not in (cel.Type.BOOL, cel.Type.DYN):
        raise FilterError(
            f"a filter must be true or false; this one gives {returns.name().lower()}"
        )
    checked = checked_ast(expression.serialize())
    try:
        cost = cost_of(checked)
    except Unbounded as exc:
        raise FilterError(f"no bound on this filter's cost: {exc}") from None
    except PatternError as exc:
        raise FilterError(f"matches(): {exc}") from None
    reference = _reference_steps(cost)
    if reference > STEPS_PER_EVALUATION:
        raise FilterError(
            f"this filter could take {reference:,} steps on a {REFERENCE_PAYLOAD_BYTES:,}-byte "
            f"event; a filter may take at most {STEPS_PER_EVALUATION:,} (loop over less, or "
            "match shorter patterns)"
        )
    if cost.patterns:
        expression = _ENVIRONMENT.deserialize(_searching_compiled(checked))
    return Filter(expression, cost)


def checked_ast(serialized: bytes) -> checked_pb2.CheckedExpr:
    """The checked AST out of ``Expression.serialize()``: a ``google.protobuf.Any``."""
    wrapper = any_pb2.Any()
    wrapper.ParseFromString(serialized)
    checked = checked_pb2.CheckedExpr()
    if not wrapper.Unpack(checked):
        raise ValueError(f"not a checked CEL expression: {wrapper.type_url}")
    return checked


def _searching_compiled(checked: checked_pb2.CheckedExpr) -> bytes:
    """The checked program with every ``matches`` call made a call of ``_SEARCH`` on the same
    text and pattern, serialised as ``Env.deserialize`` reads it."""
    waiting = [checked.expr]
    while waiting:
        node = waiting.pop()
        kind = node.WhichOneof("expr_kind")
        if kind == "call_expr":
            call = node.call_expr
            waiting += [*call.args, call.target] if call.HasField("target") else [*call.args]
            if call.function == MATCHES:
                operands = [call.target, *call.args] if call.HasField("target") else [*call.args]
                copies = [type(operand)() for operand in operands]
                for copy, operand in zip(copies, operands, strict=True):
                    copy.CopyFrom(operand)
                call.ClearField("target")
                del call.args[:]
                call.args.extend(copies)
                call.function = _SEARCH
                reference = checked.reference_map[node.id]
                del reference.overload_id[:]
                reference.overload_id.append(_SEARCH_OVERLOAD)
        elif kind == "select_expr":
            waiting.append(node.select_expr.operand)
        elif kind == "list_expr":
            waiting += node.list_expr.elements
        elif kind == "struct_expr":
            for entry in node.struct_expr.entries:
                waiting += [entry.map_key, entry.value]
        elif kind == "comprehension_expr":
            loop = node.comprehension_expr
            waiting += [loop.iter_range, loop.accu_init, loop.loop_condition, loop.loop_step]
            waiting.append(loop.result)
    wrapper = any_pb2.Any()
    wrapper.Pack(checked)
    return wrapper.SerializeToString()


def _reference_steps(cost: FilterCost) -> int:
    """The bound on the worst payload of ``REFERENCE_PAYLOAD_BYTES``: fields under different
    top-level names are different bytes of it, so only the costliest such field may take it
    all; a field and the fields inside it may each be as large. A length is at most half a
    size: in JSON, an element takes at least two bytes (``0,``)."""
    by_top: dict[str, int] = {}
    whole = cost.steps.constant
    for symbol, coefficient in cost.steps.terms.items():
        if symbol == PAYLOAD:
            whole += coefficient * REFERENCE_PAYLOAD_BYTES
            continue
        kind, _, path = symbol.partition(":")
        share = REFERENCE_PAYLOAD_BYTES // 2 if kind == "count" else REFERENCE_PAYLOAD_BYTES
        top = cost.paths[path][0]
        by_top[top] = by_top.get(top, 0) + coefficient * share
    return whole + max(by_top.values(), default=0)


def _compile_error(message: str) -> str:
    undeclared = _UNDECLARED.search(message)
    if undeclared is not None:
        name = undeclared.group(1).split(".")[0]  # CEL reports the whole dotted name
        return f"unknown name {name}: a filter sees type and payload"
    found = _POSITION.search(message)
    if found is None:
        return "not a valid CEL expression"
    line, column, what = found.groups()
    what = what.split(" expecting ")[0]  # the token list is the parser's, not the reader's
    what = what.replace("mismatched input '<EOF>'", "the expression ends too early")
    what = what.replace("{", "(").replace("}", ")").removesuffix(" [INVALID_ARGUMENT]")
    return f"not a valid CEL expression: at line {line}, column {column}: {what}"


class Events:
    """One event's filters: its payload made visible to CEL once, and what its filters may
    still spend (``STEPS_PER_EVENT`` for all of them together)."""

    def __init__(
        self, event_type: str, payload: dict[str, Any], payload_bytes: int, *, tenant_id: str
    ) -> None:
        self._tenant_id = tenant_id
        self._payload = payload
        self._payload_bytes = payload_bytes
        self._activation = _ENVIRONMENT.Activation(
            {f"{ROOT}.payload": payload, f"{ROOT}.type": event_type}
        )
        self._left = STEPS_PER_EVENT
        # Paid by the first filter that reads the payload, from the event's budget.
        self._conversion = CONVERT_BYTE * payload_bytes

    def matches(self, source: str) -> tuple[bool, str | None]:
        """Whether the event passes the filter; when it does not, why, in words. A filter that
        fails on this event (a missing field, a type mismatch), gives anything but a boolean or
        would go over its budget lets nothing through: an endpoint gets only what its filter
        says yes to."""
        try:
            program = cached(self._tenant_id, source)
        except FilterError as exc:  # saved under older rules
            return False, f"the filter cannot run: {exc}"
        bound = self.bound(program)
        conversion = self._conversion if program.cost.reads_payload else 0
        if bound > STEPS_PER_EVALUATION or bound + conversion > self._left:
            PROGRAM_BUDGET_EXCEEDED.labels(program="filter").inc()
            if bound <= STEPS_PER_EVALUATION and conversion > STEPS_PER_EVENT:
                return False, (
                    f"the filter was not run: making this event's {self._payload_bytes:,}-byte "
                    f"payload readable to CEL could take {conversion:,} steps, over the "
                    "event's budget"
                )
            spent = "its" if bound > STEPS_PER_EVALUATION else "this event's filters'"
            return False, (
                f"the filter was not run: it could take {bound:,} steps on this event, over "
                f"{spent} budget"
            )
        self._left -= bound + conversion
        if conversion:
            self._conversion = 0  # made once; the activation keeps it
        try:
            verdict = program.expression.eval(self._activation)
        except RuntimeError as exc:  # the runtime's own cap on a loop's turns
            PROGRAM_BUDGET_EXCEEDED.labels(program="filter").inc()
            return False, f"the filter was stopped: {_runtime_error(str(exc))}"
        if verdict.type() == cel.Type.ERROR:
            return False, f"the filter failed on this event: {_runtime_error(verdict.value())}"
        value = verdict.value()
        if value is True:
            return True, None
        if value is False:
            return False, "the filter said false"
        return False, f"the filter gave {verdict.type().name().lower()}, not true or false"

    def bound(self, program: Filter) -> int:
        """The program's bound on this event, in steps: its form worked out with this event's
        payload size and the actual sizes and lengths of the fields it reads and loops over."""
        return program.cost.steps.at(self._size_of(program.cost))

    def _size_of(self, cost: FilterCost) -> Any:
        def size_of(symbol: str) -> int:
            if symbol == PAYLOAD:
                return self._payload_bytes
            kind, _, path = symbol.partition(":")
            value = _field(self._payload, cost.paths[path])
            if kind == "count":
                return len(value) if isinstance(value, list | dict) else 0
            if isinstance(value, str):  # UTF-8 takes at most 4 bytes a character
                return len(value) if value.isascii() else 4 * len(value)
            return self._payload_bytes if isinstance(value, list | dict) else 8

        return size_of


def _field(payload: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        if not isinstance(payload, dict):
            return None
        payload = payload.get(name)
    return payload


_KEY = re.compile(r'Key not found in map : "?([^"]*)"?')


def _runtime_error(message: str) -> str:
    missing = _KEY.search(message)
    if missing is not None:
        return f"no field {missing.group(1)}"  # has(payload.x) tests for a field first
    message = re.sub(r"^[A-Z_]+: ", "", message).removesuffix(" [INTERNAL]")
    return message.split(" : ")[0][:200]
