"""What every CEL program a tenant writes shares -- a filter (filters.py), a transformation
(transformations.py): the environment it is compiled in (``type`` and ``payload``), the checks
made when it is saved (it parses, it type-checks, its cost has a bound that fits the budget on
a reference event), the rewrite of its ``matches`` calls to patterns compiled once, and the
bound worked out on the event at hand before it runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cel_expr_python.cel as cel
from google.protobuf import any_pb2

from app.programs.budget import PAYLOAD, REFERENCE_PAYLOAD_BYTES, STEPS_PER_EVALUATION, Unbounded
from app.programs.cel_ast import checked_pb2
from app.programs.filter_cost import MATCHES, ROOT, FilterCost, cost_of
from app.programs.patterns import PatternError, search

# What a program's ``matches`` calls become. A tenant naming it is refused by the cost walk,
# which has no rule for it.
_SEARCH = f"{ROOT}.compiled_matches"
_SEARCH_OVERLOAD = "herald_compiled_matches_string_string"
ENVIRONMENT = cel.NewEnv(
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


class ProgramError(ValueError):
    """Why a program cannot be saved, in words (it names the position of a syntax error)."""


@dataclass(frozen=True)
class Program:
    expression: Any  # cel.Expression
    cost: FilterCost


def compile_program(
    source: str,
    *,
    noun: str,
    max_length: int,
    returns: Callable[[Any], str | None],
    error: type[ProgramError],
    charged: Callable[[FilterCost], FilterCost] = lambda cost: cost,
) -> Program:
    """The program compiled and bounded; ``error`` (in words, naming it a ``noun``) if it is
    not one Herald runs. ``returns`` says what is wrong with the checked return type, if
    anything; ``charged`` adds to its cost what the caller does with what it gives."""
    if len(source) > max_length:
        raise error(f"a {noun} is at most {max_length:,} characters")
    try:
        expression = ENVIRONMENT.compile(source)
        returned = expression.return_type()
        checked = checked_ast(expression.serialize())
    except RuntimeError as exc:  # the parser's, the checker's, or the planner's refusal
        raise error(_compile_error(str(exc), noun)) from None
    if (wrong := returns(returned)) is not None:
        raise error(wrong)
    try:
        cost = charged(cost_of(checked))
    except Unbounded as exc:
        raise error(f"no bound on this {noun}'s cost: {exc}") from None
    except PatternError as exc:
        raise error(f"matches(): {exc}") from None
    reference = _reference_steps(cost)
    if reference > STEPS_PER_EVALUATION:
        raise error(
            f"this {noun} could take {reference:,} steps on a {REFERENCE_PAYLOAD_BYTES:,}-byte "
            f"event; a {noun} may take at most {STEPS_PER_EVALUATION:,} (loop over less, or "
            "match shorter patterns)"
        )
    if cost.patterns:
        expression = ENVIRONMENT.deserialize(_searching_compiled(checked))
    return Program(expression, cost)


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


def _compile_error(message: str, noun: str) -> str:
    undeclared = _UNDECLARED.search(message)
    if undeclared is not None:
        name = undeclared.group(1).split(".")[0]  # CEL reports the whole dotted name
        return f"unknown name {name}: a {noun} sees type and payload"
    found = _POSITION.search(message)
    if found is None:
        if "map key type" in message:  # the planner's: a key no CEL map may have
            return "not a valid CEL expression: a map's keys are text, integers or booleans"
        return "not a valid CEL expression"
    line, column, what = found.groups()
    what = what.split(" expecting ")[0]  # the token list is the parser's, not the reader's
    what = what.replace("mismatched input '<EOF>'", "the expression ends too early")
    what = what.replace("{", "(").replace("}", ")").removesuffix(" [INVALID_ARGUMENT]")
    return f"not a valid CEL expression: at line {line}, column {column}: {what}"


def bound_on(cost: FilterCost, payload: Any, payload_bytes: int) -> int:
    """The program's bound on this event, in steps: its form worked out with this event's
    payload size and the actual sizes and lengths of the fields it reads and loops over."""

    def size_of(symbol: str) -> int:
        if symbol == PAYLOAD:
            return payload_bytes
        kind, _, path = symbol.partition(":")
        value = _field(payload, cost.paths[path])
        if kind == "count":
            return len(value) if isinstance(value, list | dict) else 0
        if isinstance(value, str):  # UTF-8 takes at most 4 bytes a character
            return len(value) if value.isascii() else 4 * len(value)
        return payload_bytes if isinstance(value, list | dict) else 8

    return cost.steps.at(size_of)


def _field(payload: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        if not isinstance(payload, dict):
            return None
        payload = payload.get(name)
    return payload


_KEY = re.compile(r'Key not found in map : "?([^"]*)"?')


def runtime_error(message: str) -> str:
    """CEL's runtime error in words: a missing field named, the rest without its codes."""
    missing = _KEY.search(message)
    if missing is not None:
        return f"no field {missing.group(1)}"  # has(payload.x) tests for a field first
    message = re.sub(r"^[A-Z_]+: ", "", message).removesuffix(" [INTERNAL]")
    return message.split(" : ")[0][:200]
