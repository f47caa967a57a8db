"""The cost of checking a payload against a JSON Schema, bounded from the schema's graph.

A validator applies subschemas in two ways: *in place*, to the same part of the payload
(``$ref``, ``allOf``, ``anyOf``, ``oneOf``, ``not``, ``if``/``then``/``else``,
``dependentSchemas``), and *below*, to a property or an element (``properties``,
``patternProperties``, ``additionalProperties``, ``items``, ``prefixItems``, ``contains``, ...).
Sharing makes the in-place part a DAG that can fan out exponentially: 15 levels of
``anyOf: [{$ref: next}, {$ref: next}]`` is 32,768 checks of one value, 1 KB of schema.

So for every subschema and every depth below it (payloads nest at most MAX_PAYLOAD_DEPTH
levels), this counts the most work that can land on one part of the payload at that depth:
its own keywords plus, in place, its in-place subschemas' and, one level down, the work of the
subschemas one property or element can receive. An in-place cycle (a ``$ref`` back to itself
without descending) is refused. The payload has no more parts than bytes, so checking it
costs at most the work on the payload itself plus, per byte of it, the largest work on one part
at any depth below and what keywords cost per byte they read (a pattern, uniqueItems).
"""

from __future__ import annotations

import graphlib
import json
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from app.core.fields import MAX_PAYLOAD_DEPTH
from app.programs.budget import Unbounded
from app.programs.patterns import (
    MAX_INSTRUCTIONS,
    SEARCH_STEP,
    PatternError,
    PatternTooLarge,
    instructions,
)

# Steps (about a nanosecond each here: docs/benchmarks.md), for jsonschema-rs.
KEYWORD = 20  # one keyword checked on one value
VALUE = 12  # enum, compared value by value: per value (11 ns measured on 8,000)
COMPARE_BYTE = 3  # enum and const: per byte of a value compared against
# A pattern (the linear regex engine): per byte read, SEARCH_STEP per instruction of the
# program it compiles to, counted by RE2 from the same pattern (the Rust engine's worst case
# measured 4-5 ns a byte an instruction, RE2's 6-7: docs/benchmarks.md).
READ_BYTE = 2  # lengths and formats: per byte read
UNIQUE_BYTE = 250  # uniqueItems: measured up to ~0.5 us an element (40,000 numbers)

IN_PLACE_ONE = ("not", "if", "then", "else")
IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")
IN_PLACE_MAP = ("dependentSchemas", "dependencies")  # dependencies may also list names
CHILD_OF_OBJECT_ONE = ("additionalProperties", "unevaluatedProperties", "propertyNames")
CHILD_OF_ARRAY_ONE = ("additionalItems", "unevaluatedItems", "contains")
SCHEMA_MAPS = ("$defs", "definitions")  # where subschemas wait to be referred to
_READS_BYTES = ("minLength", "maxLength", "format")
_DEEP = MAX_PAYLOAD_DEPTH + 1  # payload parts lie at depth 0 (the payload) to 64


@dataclass
class _Node:
    steps: int = 0  # its own keywords, on one value
    per_byte: int = 0  # what its keywords cost per byte of that value
    in_place: list[str] = field(default_factory=list)
    property_schemas: list[str] = field(default_factory=list)  # one applies to a property
    object_schemas: list[str] = field(default_factory=list)  # all may apply to one property
    position_schemas: list[str] = field(default_factory=list)  # one applies to an element
    array_schemas: list[str] = field(default_factory=list)  # all may apply to one element


@dataclass(frozen=True)
class SchemaCost:
    """The bound: the payload itself is one part; below it are at most as many parts as it
    has bytes."""

    on_payload: int  # steps on the payload itself (depth 0)
    per_part: int  # the most steps on any one part below it
    per_byte: int  # what keywords that read bytes cost per byte

    def at(self, payload_bytes: int) -> int:
        return self.on_payload + (self.per_part + self.per_byte) * max(payload_bytes, 1)


def cost_of(schema: Any) -> SchemaCost:
    """The schema's bound; Unbounded, in words, when it has none (a cycle in place)."""
    nodes: dict[str, _Node] = {}
    _collect(schema, nodes)
    order = _in_place_order(nodes)
    work = {pointer: [0] * (_DEEP + 1) for pointer in nodes}
    reads = {pointer: [0] * (_DEEP + 1) for pointer in nodes}
    for depth in range(_DEEP + 1):
        for pointer in order:  # in-place subschemas before those that apply them
            node = nodes[pointer]
            for table, own in ((work, node.steps), (reads, node.per_byte)):
                total = own if depth == 0 else _below(node, table, depth - 1)
                total += sum(table[inner][depth] for inner in node.in_place)
                table[pointer][depth] = total
    return SchemaCost(work[""][0], max(work[""][1:]), max(reads[""]))


def _below(node: _Node, table: dict[str, list[int]], depth: int) -> int:
    """The most that one property or one element of a value can receive from ``node``."""
    one_property = max((table[p][depth] for p in node.property_schemas), default=0)
    one_property += sum(table[p][depth] for p in node.object_schemas)
    one_element = max((table[p][depth] for p in node.position_schemas), default=0)
    one_element += sum(table[p][depth] for p in node.array_schemas)
    return max(one_property, one_element)


def _in_place_order(nodes: dict[str, _Node]) -> list[str]:
    graph = {pointer: set(node.in_place) for pointer, node in nodes.items()}
    try:
        return list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        cycle = " -> ".join(p or "#" for p in exc.args[1][:4])
        raise Unbounded(
            f"the schema refers back to itself without going into the payload ({cycle})"
        ) from None


def _collect(root: Any, nodes: dict[str, _Node]) -> None:
    """Every subschema reachable from the root, with its edges; by worklist, as a schema may
    nest deeper than Python recurses."""
    waiting: list[tuple[str, Any]] = [("", root)]
    while waiting:
        pointer, schema = waiting.pop()
        if pointer in nodes:
            continue
        node = nodes[pointer] = _Node(steps=KEYWORD)
        if isinstance(schema, dict):
            waiting += _edges(root, pointer, schema, node)


def _edges(root: Any, pointer: str, schema: dict[str, Any], node: _Node) -> list[tuple[str, Any]]:
    """Fills in ``node``'s keywords and edges; answers the subschemas it reaches."""
    reached: list[tuple[str, Any]] = []
    for keyword, value in schema.items():
        at = f"{pointer}/{escape(keyword)}"
        node.steps += KEYWORD
        if keyword == "$ref" and isinstance(value, str):
            target = ref_pointer(value)
            node.in_place.append(target)
            reached.append((target, resolve(root, target)))
            continue
        held = _subschemas(keyword, value, at)
        if held is None:  # a keyword that checks the value itself
            node.steps += _keyword_steps(keyword, value)
            node.per_byte += _keyword_per_byte(keyword, value, at)
            continue
        if keyword == "patternProperties":  # each key against each pattern
            node.per_byte += sum(_pattern_per_byte(pattern, at) for pattern in value)
        edges = _applied_as(node, keyword, value)
        if edges is not None:
            edges += [subpointer for subpointer, _ in held]
        reached += held
    return reached


def _subschemas(keyword: str, value: Any, at: str) -> list[tuple[str, Any]] | None:
    """The subschemas ``keyword`` holds, by pointer; None when it holds none: it checks the
    value itself."""
    if keyword in IN_PLACE_ONE or keyword in CHILD_OF_OBJECT_ONE or keyword in CHILD_OF_ARRAY_ONE:
        return [(at, value)]
    if keyword in (*IN_PLACE_MANY, "prefixItems", "items") and isinstance(value, list):
        return [(f"{at}/{i}", item) for i, item in enumerate(value)]
    if keyword == "items":
        return [(at, value)]
    if keyword in IN_PLACE_MAP and isinstance(value, dict):
        named = {name: item for name, item in value.items() if isinstance(item, dict | bool)}
    elif keyword in ("properties", "patternProperties", *SCHEMA_MAPS) and isinstance(value, dict):
        named = value
    else:
        return None
    return [(f"{at}/{escape(name)}", item) for name, item in named.items()]


def _applied_as(node: _Node, keyword: str, value: Any) -> list[str] | None:
    """Where the subschemas of ``keyword`` apply, as ``node``'s list of them: in place, to one
    property, to every property, to one element, to every element; None for those that
    wait to be referred to ($defs)."""
    if keyword in IN_PLACE_ONE or keyword in IN_PLACE_MANY or keyword in IN_PLACE_MAP:
        return node.in_place
    if keyword == "properties":
        return node.property_schemas
    if keyword == "patternProperties" or keyword in CHILD_OF_OBJECT_ONE:
        return node.object_schemas
    if keyword in ("prefixItems", "items") and isinstance(value, list):
        return node.position_schemas
    if keyword == "items" or keyword in CHILD_OF_ARRAY_ONE:
        return node.array_schemas
    return None


def _keyword_steps(keyword: str, value: Any) -> int:
    if keyword == "enum" and isinstance(value, list):
        return _enum_steps(value)
    if keyword == "const":
        return COMPARE_BYTE * len(json.dumps(value))
    if keyword in ("required", "dependentRequired"):
        return KEYWORD * len(value)  # a look-up per name
    return 0


def _enum_steps(values: list[Any]) -> int:
    """Measured (docs/benchmarks.md): an enum of only strings, or only numbers, costs the
    same at 10 values as at 8,000 (it is looked up); any other is compared value by value."""
    if all(isinstance(v, str) for v in values) or all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    ):
        return KEYWORD + COMPARE_BYTE * max((len(json.dumps(v)) for v in values), default=0)
    return sum(VALUE + COMPARE_BYTE * len(json.dumps(v)) for v in values)


def _keyword_per_byte(keyword: str, value: Any, at: str) -> int:
    if keyword == "pattern" and isinstance(value, str):
        return _pattern_per_byte(value, at)
    if keyword == "uniqueItems" and value is True:
        return UNIQUE_BYTE
    if keyword in _READS_BYTES:
        return READ_BYTE
    return 0


_ECMA_ESCAPE = re.compile(r"\\u\{?([0-9A-Fa-f]{4,6})\}?")


def _pattern_per_byte(pattern: str, at: str) -> int:
    """A pattern's cost per byte it reads. Its program is counted by RE2 (ECMA's ``\\uXXXX``
    written as RE2's ``\\x{XXXX}``); a pattern RE2 does not read is priced at the most a
    pattern may compile to, which the engine's own size limit holds it to (schemas.PATTERNS)."""
    try:
        count = instructions(_ECMA_ESCAPE.sub(r"\\x{\1}", pattern))
    except PatternTooLarge as exc:
        raise Unbounded(f"{exc} (at {at or '#'})") from None
    except PatternError:
        count = MAX_INSTRUCTIONS
    return SEARCH_STEP * count


def resolve(root: Any, pointer: str) -> Any:
    """The subschema at a JSON pointer (``/a/b``, RFC 6901) inside ``root``; Unbounded when
    there is none."""
    node = root
    for part in pointer.split("/")[1:] if pointer else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise Unbounded(f"$ref #{pointer[:100]} points to nothing in the schema")
    return node


def ref_pointer(ref: str) -> str:
    """The JSON pointer a ``#/...`` reference names (its fragment, percent-decoded)."""
    return urllib.parse.unquote(ref.removeprefix("#"))


def escape(name: str) -> str:
    """A name as one part of a JSON pointer (RFC 6901)."""
    return name.replace("~", "~0").replace("/", "~1")
