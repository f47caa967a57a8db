"""Payload schemas: the JSON Schema an event type of the catalogue holds its payloads to,
checked, bounded and compiled once when saved, payloads checked against it at accept
(jsonschema-rs, Draft 2020-12 unless the schema's ``$schema`` says otherwise). Not to be
confused with a domain's ``schemas``, the API's request and response models.

Herald fetches nothing and resolves every reference itself: a ``$ref`` must be a JSON pointer
into the schema (``#/...``), and nothing may move the base it is read from (no ``$id`` below
the root, no anchors, no dynamic references). That keeps the schema one graph Herald can walk
(payload_schema_cost.py) to bound what checking a payload costs. Patterns run on the
linear-time regex engine. Messages name the JSON pointer that fails and the rule, never a value
from the payload.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import jsonschema_rs

from app.core.metrics import PROGRAM_BUDGET_EXCEEDED
from app.programs.budget import REFERENCE_PAYLOAD_BYTES, STEPS_PER_EVALUATION, Unbounded
from app.programs.payload_schema_cost import SchemaCost, cost_of

MAX_SCHEMA_BYTES = 64 * 1024
_REFS = ("$ref",)
# What would make a reference mean something other than "this place in this document".
_MOVES_THE_BASE = ("$dynamicRef", "$recursiveRef", "$anchor", "$dynamicAnchor", "$recursiveAnchor")
# The drafts a schema may name in ``$schema``: any other URI would be fetched to find its
# meta-schema -- over HTTP or from a file -- which is an SSRF and a file read from the API.
DRAFTS = frozenset(
    uri + suffix
    for uri in (
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft-07/schema",
        "http://json-schema.org/draft-06/schema",
        "http://json-schema.org/draft-04/schema",
    )
    for suffix in ("", "#")
)
# Linear-time matching: no lookaround or backreferences, so no pattern can backtrack. 64 KiB of
# program holds a pattern to about 1,000-1,700 of RE2's instructions (measured), under the
# patterns.MAX_INSTRUCTIONS a pattern RE2 cannot count is priced at (payload_schema_cost.py).
PATTERNS = jsonschema_rs.RegexOptions(size_limit=64 * 1024, dfa_size_limit=1 << 20)


def _fetch_nothing(uri: str) -> Any:
    raise ValueError(f"Herald fetches no schema ({uri[:100]})")


class SchemaError(ValueError):
    """Why a schema cannot be saved, in words."""


@dataclass
class CompiledSchema:
    """A schema ready to check payloads: its validator and the bound on what a check costs."""

    schema: dict[str, Any]
    validator: Any  # jsonschema_rs.Validator
    cost: SchemaCost
    # Validators for parts of the schema, made when a violation is looked for.
    parts: dict[tuple[str, str], Any] = field(default_factory=dict)


def compile_schema(schema: dict[str, Any]) -> CompiledSchema:
    """The schema made ready; SchemaError when it is too large, refers outside itself, has
    no bound on its cost or is not a valid JSON Schema."""
    if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
        raise SchemaError(f"a schema is at most {MAX_SCHEMA_BYTES} bytes of JSON")
    named = schema.get("$schema")
    if named is not None and named not in DRAFTS:
        raise SchemaError(
            "$schema must name a JSON Schema draft (2020-12, 2019-09, 7, 6 or 4): Herald fetches "
            "no meta-schema"
        )
    try:
        jsonschema_rs.meta.validate(schema)
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as exc:
        raise SchemaError(f"not a valid JSON Schema: {_first_line(exc)}") from None
    wrong = _unresolvable(schema)
    if wrong is not None:
        raise SchemaError(wrong)
    checker = validator(schema)  # refuses a pattern the engine does not read, in its words
    try:
        cost = cost_of(schema)
    except Unbounded as exc:
        raise SchemaError(f"no bound on this schema's cost: {exc}") from None
    reference = cost.at(REFERENCE_PAYLOAD_BYTES)
    if reference > STEPS_PER_EVALUATION:
        raise SchemaError(
            f"checking a {REFERENCE_PAYLOAD_BYTES:,}-byte payload against this schema could "
            f"take {reference:,} steps; a schema may take at most {STEPS_PER_EVALUATION:,} "
            "(fewer anyOf/oneOf branches sharing one $ref, smaller enums, shorter patterns)"
        )
    return CompiledSchema(schema, checker, cost)


def validator(schema: Any, registry: Any = None) -> Any:
    """A validator as Herald makes them: nothing fetched, patterns in linear time."""
    try:
        return jsonschema_rs.validator_for(
            schema, retriever=_fetch_nothing, registry=registry, pattern_options=PATTERNS
        )
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as exc:
        raise SchemaError(f"not a valid JSON Schema: {_first_line(exc)}") from None


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid"


def _unresolvable(root: Any) -> str | None:
    """Why a reference in the schema would not be a place in it, or None. By worklist: a
    schema may nest deeper than Python recurses."""
    waiting: list[tuple[Any, bool]] = [(root, True)]
    while waiting:
        node, at_root = waiting.pop()
        if isinstance(node, list):
            waiting += [(item, False) for item in node]
            continue
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if key in _MOVES_THE_BASE:
                return f"{key} is not supported: a $ref must be a JSON pointer (#/...)"
            if key in ("$id", "id") and not at_root and isinstance(value, str):
                return "$id may appear only at the schema's root: a $ref is read from there"
            if key in _REFS and isinstance(value, str) and not _is_pointer(value):
                return (
                    "$ref must point inside the schema with a JSON pointer (#/...): Herald "
                    f"fetches nothing ({key}: {value[:100]})"
                )
            waiting.append((value, False))
    return None


def _is_pointer(ref: str) -> bool:
    return ref == "#" or ref.startswith("#/")


class OverBudget(Exception):
    """Checking this payload could cost more than a check may: its bound, in steps."""

    def __init__(self, steps: int) -> None:
        super().__init__(steps)
        self.steps = steps


def conforms(compiled: CompiledSchema, payload: Any, payload_bytes: int) -> bool:
    """Whether the payload matches; OverBudget, before checking anything, when its bound on
    this payload is over the budget."""
    bound = compiled.cost.at(payload_bytes)
    if bound > STEPS_PER_EVALUATION:
        PROGRAM_BUDGET_EXCEEDED.labels(program="schema").inc()
        raise OverBudget(bound)
    return bool(compiled.validator.is_valid(payload))
