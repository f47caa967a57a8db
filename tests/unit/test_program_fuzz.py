"""Hostile schemas and patterns, generated: whatever a tenant writes, Herald either refuses it
when saved or bounds its work -- and the bound is checked against work counted independently
(keyword evaluations counted by a second JSON Schema implementation, the pure-Python
``jsonschema``; a pattern's program counted by RE2), never against a clock. Filters' loops:
test_filter_fuzz.py."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jsonschema
import re2
from google.protobuf.message import Message
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from app.programs import filters
from app.programs.budget import STEPS_PER_EVALUATION
from app.programs.cel_ast import syntax_pb2
from app.programs.cel_programs import checked_ast
from app.programs.patterns import MAX_INSTRUCTIONS, SEARCH_STEP
from app.programs.payload_schema_cost import KEYWORD
from app.programs.payload_schema_violations import first_violation
from app.programs.payload_schemas import OverBudget, SchemaError, compile_schema, conforms

FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)

# ---------------------------------------------------------------- JSON Schema


@dataclass
class Schema:
    root: dict[str, Any]
    cycle_in_place: bool


def _leaf() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.just({"type": "integer", "minimum": 0}),
        st.just({"type": "string", "maxLength": 20}),
        st.builds(lambda n: {"enum": [*map(str, range(n)), 1.5]}, st.integers(1, 5000)),
        st.builds(lambda n: {"enum": list(range(n))}, st.integers(1, 5000)),
        st.builds(lambda n: {"type": "string", "pattern": "(a+)+" * n + "$"}, st.integers(1, 80)),
        st.just({"pattern": "(?=a)b"}),  # lookaround: no linear engine runs it
        st.just({"uniqueItems": True}),
        st.just({"not": {}}),
        st.just(True),
    )


def _subschema(depth: int, refs: list[str]) -> st.SearchStrategy[Any]:
    if depth == 0:
        return st.one_of(_leaf(), st.sampled_from([{"$ref": r} for r in refs]))
    inner = _subschema(depth - 1, refs)
    return st.one_of(
        inner,
        st.builds(
            lambda k, xs: {k: xs},
            st.sampled_from(["anyOf", "oneOf", "allOf"]),
            st.lists(inner, min_size=1, max_size=4),
        ),
        st.builds(
            lambda p: {"type": "object", "properties": p},
            st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
        ),
        st.builds(lambda i: {"type": "array", "items": i}, inner),
        st.builds(lambda s: {"not": s}, inner),
    )


@st.composite
def schemas(draw: st.DrawFn) -> Schema:
    # A chain of $defs, each level a fan of branches sharing references to the next: the
    # in-place DAG an anyOf fan makes (2 ** levels paths), maybe closed into a cycle.
    levels = draw(st.integers(1, 20))
    width = draw(st.integers(1, 3))
    keyword = draw(st.sampled_from(["anyOf", "oneOf", "allOf"]))
    cycle = draw(st.booleans()) and draw(st.booleans())
    defs: dict[str, Any] = {}
    for i in range(levels):
        target = f"#/$defs/d{i + 1}" if i + 1 < levels else ("#/$defs/d0" if cycle else None)
        branches = [{"$ref": target}] * width if target else [draw(_leaf())]
        defs[f"d{i}"] = {keyword: branches}
    refs = [f"#/$defs/d{i}" for i in range(levels)] + ["#"]
    body = draw(_subschema(3, refs))
    root: dict[str, Any] = {"$defs": defs, "allOf": [body]}
    # A $ref to the root from below is fine (it descends); one in place is a cycle.
    in_place_root = "#" in json.dumps(body).replace('"#/', "")
    return Schema(root, cycle or in_place_root)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(alphabet="ab", max_size=12),
    lambda children: (
        st.lists(children, max_size=6)
        | st.dictionaries(st.sampled_from(["a", "b", "c"]), children, max_size=3)
    ),
    max_leaves=30,
)


def keyword_evaluations(schema: dict[str, Any], payload: Any) -> int:
    """How many keywords python-jsonschema evaluates checking ``payload``: a second
    implementation's count of the work (it explains every branch of an anyOf in full)."""
    count = 0
    base = jsonschema.Draft202012Validator

    def counted(check: Any) -> Any:
        def wrapper(*args: Any) -> Any:
            nonlocal count
            count += 1
            yield from check(*args) or ()

        return wrapper

    kinds = {name: counted(check) for name, check in base.VALIDATORS.items()}
    counting = jsonschema.validators.extend(base, kinds)
    counting(schema).is_valid(payload)
    return count


@FUZZ
@given(schema=schemas(), payload=JSON_VALUES)
def test_a_hostile_schema_is_refused_or_its_work_is_bounded(schema: Schema, payload: Any) -> None:
    try:
        compiled = compile_schema(schema.root)
    except SchemaError as refused:
        event(f"schema refused: {str(refused)[:40]}")
        return  # refused when saved, in words
    assert not schema.cycle_in_place, schema.root
    wrapped = {"payload": payload}  # payloads are objects
    size = len(json.dumps(wrapped, separators=(",", ":")))
    bound = compiled.cost.at(size)
    try:
        matches = conforms(compiled, wrapped, size)
    except OverBudget:
        event("schema not run: over budget on this payload")
        assert bound > STEPS_PER_EVALUATION
        return
    event("schema checked: " + ("matches" if matches else "fails"))
    # Every keyword the other implementation evaluated is in Herald's bound.
    assert keyword_evaluations(schema.root, wrapped) * KEYWORD <= bound
    if not matches:
        said = first_violation(compiled, wrapped, size)
        assert said.startswith(("at /", "it fails the schema")), said
        # The explanation compiled at most a validator per keyword of the schema: one
        # violation looked for, never an error tree.
        assert len(compiled.parts) <= json.dumps(schema.root).count('"') + 2


# ---------------------------------------------------------------- regular expressions

# Pieces of patterns, from the cheap to an attacker's: Unicode classes are ~1,200 RE2
# instructions each, a counted repetition repeats its part, (a|b)*a(a|b){n} keeps a DFA from
# settling. Every piece is RE2 syntax and ECMA-262 syntax alike.
PIECES = st.sampled_from(
    ["a", "[a-z]", "(a|b)", ".", "\\d", "\\pL", "[\\p{L}\\p{N}]", "(?:ab|ba)", "[^x]", "\\s"]
)
REPEATS = st.sampled_from(["", "*", "+", "?", "{3}", "{20}", "{60}", "{300}", "{1000}"])


@st.composite
def patterns(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.tuples(PIECES, REPEATS), min_size=1, max_size=4))
    text = "".join(piece + repeat for piece, repeat in parts)
    if draw(st.booleans()):
        text = f"({text})" + draw(REPEATS)
    return draw(st.sampled_from(["", "^", "(?i)"])) + text


def _cel_string(pattern: str) -> str:
    return '"' + pattern.replace("\\", "\\\\") + '"'


def _functions_called(root: Message) -> set[str]:
    """Every function a CEL AST calls, from a walk of all its messages."""
    called: set[str] = set()
    waiting = [root]
    while waiting:
        message = waiting.pop()
        if isinstance(message, syntax_pb2.Expr.Call):
            called.add(message.function)
        for described, value in message.ListFields():
            if described.type == described.TYPE_MESSAGE:
                repeated = described.is_repeated
                waiting += list(value) if repeated else [value]
    return called


@FUZZ
@given(
    pattern=patterns(),
    text=st.text(alphabet="abx1 é", max_size=400),
    on=st.sampled_from(["type", "payload.b"]),
)
def test_a_hostile_pattern_is_refused_or_compiled_once_and_priced_by_its_program(
    pattern: str, text: str, on: str
) -> None:
    source = f"{on}.matches({_cel_string(pattern)})"
    try:
        program = filters.compiled(source)
    except filters.FilterError as refused:
        event(f"pattern refused: {str(refused).split(';')[0][:50]}")
        return
    # Built once: the program as it runs searches with the pattern compiled when saved.
    called = _functions_called(checked_ast(program.expression.serialize()).expr)
    assert "matches" not in called and called, source
    counted = re2.compile(pattern).programsize  # RE2's own count of the program
    assert counted <= MAX_INSTRUCTIONS
    payload = {"b": text}
    published = filters.Events(
        text if on == "type" else "order.paid", payload, len(json.dumps(payload)), tenant_id="t"
    )
    assert published.bound(program) >= SEARCH_STEP * counted * len(text.encode()), source
    matched, why = published.matches(source)
    # RE2's own verdict: the rewrite changed when the pattern is compiled, not what it says.
    if published.bound(program) <= STEPS_PER_EVALUATION:
        assert matched is (re2.search(pattern, text) is not None), (source, text, why)
    event("pattern accepted")


@FUZZ
@given(pattern=patterns())
def test_a_hostile_schema_pattern_is_refused_or_priced_by_its_program(pattern: str) -> None:
    schema = {"properties": {"s": {"type": "string", "pattern": pattern}}}
    try:
        compiled = compile_schema(schema)
    except SchemaError as refused:
        event(f"schema pattern refused: {str(refused)[:50]}")
        return
    counted = re2.compile(pattern).programsize
    size = 2048
    # Every byte of the payload may be read by the pattern, at its program's price.
    assert compiled.cost.at(size) >= SEARCH_STEP * counted * (size - len('{"s":""}')), pattern
    event("schema pattern accepted")
