"""JSON Schema for the event-type catalogue: a schema checked and compiled once when saved,
payloads checked against it at accept in microseconds (jsonschema-rs, Draft 2020-12 unless
the schema's ``$schema`` says otherwise).

Herald fetches nothing: a ``$ref`` must point inside the schema (``#...``). Messages name the
JSON pointer that fails and the rule, never a value from the payload.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema_rs

MAX_SCHEMA_BYTES = 64 * 1024
_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
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


def _fetch_nothing(uri: str) -> Any:
    raise ValueError(f"Herald fetches no schema ({uri[:100]})")


class SchemaError(ValueError):
    """Why a schema cannot be saved, in words."""


def compile_schema(schema: dict[str, Any]) -> Any:
    """The schema's validator; SchemaError when it is too large, refers outside itself or is
    not a valid JSON Schema."""
    if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
        raise SchemaError(f"a schema is at most {MAX_SCHEMA_BYTES} bytes of JSON")
    named = schema.get("$schema")
    if named is not None and named not in DRAFTS:
        raise SchemaError(
            "$schema must name a JSON Schema draft (2020-12, 2019-09, 7, 6 or 4): Herald fetches "
            "no meta-schema"
        )
    outside = _outside_ref(schema)
    if outside is not None:
        raise SchemaError(
            f"$ref must point inside the schema (#/...): Herald fetches nothing ({outside})"
        )
    try:
        jsonschema_rs.meta.validate(schema)
        # Defence in depth: whatever still names a remote resource is not fetched.
        return jsonschema_rs.validator_for(schema, retriever=_fetch_nothing)
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid"
        raise SchemaError(f"not a valid JSON Schema: {first}") from None


def _outside_ref(node: Any) -> str | None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _REF_KEYWORDS and isinstance(value, str) and not value.startswith("#"):
                return f"{key}: {value[:100]}"
            found = _outside_ref(value)
            if found is not None:
                return found
    elif isinstance(node, list):
        for item in node:
            found = _outside_ref(item)
            if found is not None:
                return found
    return None


def violation(validator: Any, payload: dict[str, Any]) -> str | None:
    """The first way ``payload`` fails the schema, in words; None when it matches."""
    for error in validator.iter_errors(payload):
        pointer = "".join(
            "/" + str(part).replace("~", "~0").replace("/", "~1") for part in error.instance_path
        )
        at = pointer or "/"
        kind = error.kind
        if isinstance(kind, jsonschema_rs.ValidationErrorKind.Required):
            return f"at {at}: the required property {json.dumps(kind.property)} is missing"
        if isinstance(kind, jsonschema_rs.ValidationErrorKind.Type):
            return f"at {at}: must be of type {' or '.join(map(str, kind.types))}"
        keyword = error.schema_path[-1] if error.schema_path else "schema"
        return f'at {at}: fails the schema\'s "{keyword}" rule'
    return None
