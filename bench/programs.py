"""Tenant programs at their budget: for the costliest filters, transformations and schemas
Herald accepts, the payload grown until the program's bound is just within its budget (a
filter's or a transformation's with the payload made CEL's, which its event pays once), then
the evaluation timed, cold, as each event's is -- beside the time to parse that payload, which
every request pays anyway. A transformation is timed as a worker runs it for a delivery:
the stored payload parsed, made CEL's, the program run and its body written.

A step is meant to be at least a nanosecond of real work: the figure to watch is the largest
measured time per bounded step (below 1 means the bound holds in time, with that margin).

    .venv/bin/python bench/programs.py
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script

from app.core.config import Settings
from app.programs import filters, transformations
from app.programs.budget import STEPS_PER_EVALUATION, STEPS_PER_EVENT
from app.programs.cel_programs import bound_on
from app.programs.filter_cost import CONVERT_BYTE
from app.programs.payload_schema_violations import first_violation
from app.programs.payload_schemas import CompiledSchema, compile_schema

TIMINGS = 7  # each evaluation this many times; the median is reported
MAX_PAYLOAD_BYTES = Settings.model_fields["max_payload_bytes"].default


def _ab(n: int) -> str:
    """n letters a and b in a fixed pseudo-random order: text a (a|b)*a(a|b){k} pattern keeps
    RE2's DFA from settling on, so the search runs at its slowest."""
    state, letters = 12345, []
    for _ in range(n):
        state = (state * 1103515245 + 12345) % 2**31
        letters.append("ab"[state >> 16 & 1])
    return "".join(letters)


# (filter, payload of size n)
FILTERS: list[tuple[str, Callable[[int], dict[str, Any]]]] = [
    ("payload.a.exists(x, x == 7)", lambda n: {"a": [0] * n}),
    (
        'payload.a.all(x, x.qty > 1 && x.sku != "abc")',
        lambda n: {"a": [{"qty": 2, "sku": "x"}] * n},
    ),
    ("payload.lines.all(l, l.tags.all(t, t != 0))", lambda n: {"lines": [{"tags": [1] * 50}] * n}),
    ("payload.a.exists_one(x, x == 0)", lambda n: {"a": [1] * n}),
    ("payload.a == payload.b", lambda n: {"a": list(range(n)), "b": list(range(n))}),
    ('payload.s.contains("abcabcabd")', lambda n: {"s": "abc" * n}),
    ('payload.s.matches("^(a|b)*c")', lambda n: {"s": "ab" * n}),
    # Regular expressions at their slowest, each compiled once when saved and priced by the
    # instructions RE2 compiled it to: the costliest kind of filter a tenant can write.
    ('payload.s.matches("(a|b)*a(a|b){20}c")', lambda n: {"s": _ab(n)}),
    ('payload.s.matches("(?:a|b)*a(?:a|b){110}c")', lambda n: {"s": _ab(n)}),
    ('payload.s.matches("[a-z]{60}x")', lambda n: {"s": "abcdefghij" * (n // 10 + 1)}),
    ('payload.l.all(x, x.matches("^(a|b)*a(a|b){8}c$"))', lambda n: {"l": [_ab(30)] * n}),
    ('payload.s + payload.s + payload.s == "x"', lambda n: {"s": "a" * n}),
    ("size(payload.s) > 0", lambda n: {"s": "é" * n}),
    ('type in ["a", "b"] && payload.amount > 100', lambda n: {"amount": 150, "pad": "x" * n}),
]

# (transformation, payload of size n): what a chat message, a partner's format or a skip on a
# loop or a pattern costs at its budget.
TRANSFORMATIONS: list[tuple[str, Callable[[int], dict[str, Any]]]] = [
    (
        '{"body": {"text": "Order " + payload.id + " paid: " + string(payload.amount),'
        ' "blocks": [{"type": "section", "text": payload.note}]}}',
        lambda n: {"id": "o-17", "amount": 12, "note": "x" * n},
    ),
    (
        '{"body": {"items": payload.lines, "count": size(payload.lines)}, "path": "/orders"}',
        lambda n: {"lines": [{"sku": "a-1", "qty": 2, "tags": ["x", "y"]}] * n},
    ),
    ('{"body": {"t": payload.s + payload.s + payload.s}}', lambda n: {"s": "a" * n}),
    ('{"skip": payload.a.exists(x, x == 7), "body": payload}', lambda n: {"a": [0] * n}),
    ('{"skip": !payload.s.matches("(a|b)*a(a|b){20}c")}', lambda n: {"s": _ab(n)}),
]


def _fan(depth: int) -> dict[str, Any]:
    levels: dict[str, Any] = {
        f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(depth)
    }
    levels[f"d{depth}"] = {"not": {}}
    return {"$defs": levels, "$ref": "#/$defs/d0"}


# (schema, payload of size n, does it match)
SCHEMAS: list[tuple[str, dict[str, Any], Callable[[int], Any]]] = [
    ("anyOf fan, 12 levels, at the root", _fan(12), lambda n: {"x": [0] * n}),
    ("items: mixed enum of 20", {"properties": {"a": {"items": {"enum": [*map(str, range(19)), None]}}}},
     lambda n: {"a": [None] * n}),
    ("uniqueItems", {"properties": {"a": {"uniqueItems": True}}}, lambda n: {"a": [i / 3 for i in range(n)]}),
    ("pattern", {"properties": {"s": {"pattern": "^(a|b)*c$"}}}, lambda n: {"s": "ab" * n}),
    ("pattern, DFA-hostile", {"properties": {"s": {"pattern": "(a|b)*a(a|b){20}c"}}},
     lambda n: {"s": _ab(n)}),
    ("pattern, DFA-hostile, long", {"properties": {"s": {"pattern": "(?:a|b)*a(?:a|b){110}c"}}},
     lambda n: {"s": _ab(n)}),
    ("objects in arrays", {"properties": {"lines": {"items": {"type": "object", "required": ["q"],
     "properties": {"q": {"type": "integer", "minimum": 0}, "t": {"items": {"type": "integer"}}}}}}},
     lambda n: {"lines": [{"q": 1, "t": [1, 2, 3]}] * n}),
]  # fmt: skip


def _largest(fits: Callable[[int], bool]) -> int:
    """The largest n for which ``fits(n)`` (and the payload is within Herald's default limit),
    by doubling then bisecting."""
    low, high = 1, 2
    while fits(high) and high < MAX_PAYLOAD_BYTES:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def _timed(call: Callable[..., Any], *args: Any, **kwargs: Any) -> float:
    """The median time of ``call(*args, **kwargs)``, in nanoseconds."""
    times = []
    for _ in range(TIMINGS):
        started = time.perf_counter_ns()
        call(*args, **kwargs)
        times.append(time.perf_counter_ns() - started)
    return median(times)


def _filter_bound(program: filters.Filter, payload: dict[str, Any]) -> int:
    """The filter's bound on this event alone, with the payload made CEL's (which the first
    of an event's filters to read it pays) -- or over the budget when it may not run."""
    size = len(json.dumps(payload))
    if size > MAX_PAYLOAD_BYTES:
        return STEPS_PER_EVENT + 1
    bound = filters.Events("order.paid", payload, size, tenant_id="bench").bound(program)
    conversion = CONVERT_BYTE * size if program.cost.reads_payload else 0
    if bound > STEPS_PER_EVALUATION:
        return STEPS_PER_EVENT + 1
    return bound + conversion


def _evaluate(source: str, payload: dict[str, Any], size: int) -> None:
    # A new event each time: an event's filters share one budget.
    filters.Events("order.paid", payload, size, tenant_id="bench").matches(source)


def _filter_figures() -> list[dict[str, Any]]:
    rows = []
    for source, payload_of in FILTERS:
        program = filters.compiled(source)

        def fits(n: int, program: filters.Filter = program, payload_of: Any = payload_of) -> bool:
            return _filter_bound(program, payload_of(n)) <= STEPS_PER_EVENT

        payload = payload_of(_largest(fits))
        encoded = json.dumps(payload)
        taken = _timed(_evaluate, source, payload, len(encoded))
        parse = _timed(json.loads, encoded)
        rows.append(_row(source, len(encoded), _filter_bound(program, payload), taken, parse))
    return rows


def _transformation_bound(program: filters.Filter, payload: dict[str, Any]) -> int:
    """The transformation's bound on this delivery, its payload made CEL's included -- or over
    the budget when it may not run."""
    encoded = json.dumps(payload, separators=(",", ":")).encode()
    if len(encoded) > MAX_PAYLOAD_BYTES:
        return STEPS_PER_EVENT + 1
    bound = bound_on(program.cost, payload, len(encoded))
    if bound > STEPS_PER_EVALUATION:
        return STEPS_PER_EVENT + 1
    read = CONVERT_BYTE + transformations.PARSE_BYTE
    return bound + (read * len(encoded) if program.cost.reads_payload else 0)


def _transformation_figures() -> list[dict[str, Any]]:
    rows = []
    for source, payload_of in TRANSFORMATIONS:
        program = transformations.compiled(source)

        def fits(n: int, program: filters.Filter = program, payload_of: Any = payload_of) -> bool:
            return _transformation_bound(program, payload_of(n)) <= STEPS_PER_EVENT

        payload = payload_of(_largest(fits))
        encoded = json.dumps(payload, separators=(",", ":")).encode()
        taken = _timed(transformations.run, program, "order.paid", encoded, max_body_bytes=1 << 24)
        parse = _timed(json.loads, encoded)
        steps = _transformation_bound(program, payload)
        rows.append(_row(f"transformation: {source}", len(encoded), steps, taken, parse))
    return rows


def _schema_figures() -> list[dict[str, Any]]:
    rows = []
    for name, schema, payload_of in SCHEMAS:
        compiled = compile_schema(schema)

        def fits(n: int, compiled: CompiledSchema = compiled, payload_of: Any = payload_of) -> bool:
            size = len(json.dumps(payload_of(n)))
            return size <= MAX_PAYLOAD_BYTES and compiled.cost.at(size) <= STEPS_PER_EVALUATION

        payload = payload_of(_largest(fits))
        encoded = json.dumps(payload)
        steps = compiled.cost.at(len(encoded))
        taken = _timed(compiled.validator.is_valid, payload)
        parse = _timed(json.loads, encoded)
        rows.append(_row(f"schema: {name}", len(encoded), steps, taken, parse))
        if not compiled.validator.is_valid(payload):
            explained = _timed(first_violation, compiled, payload, len(encoded))
            rows.append(_row("  its first violation", len(encoded), steps, explained, parse))
    return rows


def _row(program: str, size: int, steps: int, taken_ns: float, parse_ns: float) -> dict[str, Any]:
    return {
        "program": program,
        "payload_bytes": size,
        "bound_steps": steps,
        "ms": taken_ns / 1e6,
        "parse_ms": parse_ns / 1e6,
        "ns_per_step": taken_ns / steps,
    }


def measure() -> dict[str, Any]:
    filtering, transforming = _filter_figures(), _transformation_figures()
    rows = filtering + transforming + _schema_figures()
    worst = max(rows, key=lambda r: r["ns_per_step"])
    return {
        "budget_steps": STEPS_PER_EVALUATION,
        "programs": rows,
        "worst_ms": max(r["ms"] for r in rows),
        "worst_ns_per_step": worst["ns_per_step"],
        "worst_program": worst["program"],
        # A transformation's cost per delivery at its budget, beside the filters' per event
        # (both cold, both with their payload made CEL's) in the same run.
        "transformation_worst_ms": max(r["ms"] for r in transforming),
        "transformation_worst_ns_per_step": max(r["ns_per_step"] for r in transforming),
        "filter_worst_ms": max(r["ms"] for r in filtering),
        "filter_worst_ns_per_step": max(r["ns_per_step"] for r in filtering),
    }


def main() -> None:
    figures = measure()
    print(f"{'program':58} {'payload':>9} {'bound':>10} {'took':>9} {'parse':>8} {'ns/step':>8}")
    for r in figures["programs"]:
        print(
            f"{r['program'][:58]:58} {r['payload_bytes']:>9,} {r['bound_steps']:>10,} "
            f"{r['ms']:>7.2f}ms {r['parse_ms']:>6.2f}ms {r['ns_per_step']:>8.3f}"
        )
    print(
        f"\nbudget {figures['budget_steps']:,} steps; slowest {figures['worst_ms']:.2f} ms; "
        f"at most {figures['worst_ns_per_step']:.3f} ns a bounded step ({figures['worst_program']})"
    )
    print(
        f"a transformation at its budget: slowest {figures['transformation_worst_ms']:.2f} ms, "
        f"{figures['transformation_worst_ns_per_step']:.3f} ns a step; a filter: slowest "
        f"{figures['filter_worst_ms']:.2f} ms, {figures['filter_worst_ns_per_step']:.3f} ns a step"
    )


if __name__ == "__main__":
    main()
