"""Every request the docs' examples make names a route the API has, and every field it sends and
every field its ``# -> ...`` answer shows is one the OpenAPI document defines -- the examples
tests/system/test_doc_examples.py cannot run included."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.fixtures.doc_examples import PAGES, REPO, Step, blocks, request_of, steps

OPENAPI = json.loads((REPO / "openapi" / "openapi.json").read_text())


def _resolved(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = OPENAPI["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _alternatives(schema: dict[str, Any]) -> list[dict[str, Any]]:
    schema = _resolved(schema)
    if "anyOf" in schema:
        return [alt for option in schema["anyOf"] for alt in _alternatives(option)]
    return [schema]


def unknown_fields(value: Any, schema: dict[str, Any], at: str = "") -> list[str]:
    """The fields of ``value`` that ``schema`` does not define, by their place."""
    if isinstance(value, dict):
        objects = [alt for alt in _alternatives(schema) if "properties" in alt]
        if not objects:  # a free-form object: headers, a payload, a JSON Schema
            return []
        found: list[str] = []
        for key, item in value.items():
            fields = [alt["properties"][key] for alt in objects if key in alt["properties"]]
            if not fields:
                found.append(f"{at}/{key}")
            else:
                found += unknown_fields(item, fields[0], f"{at}/{key}")
        return found
    if isinstance(value, list):
        arrays = [alt["items"] for alt in _alternatives(schema) if "items" in alt]
        if not arrays:  # a free-form list
            return []
        return [place for item in value for place in unknown_fields(item, arrays[0], at)]
    return []


def sketched_answer(expected: str) -> Any:
    """The ``# -> <status> <body>`` line's body as JSON, its ``...`` left out."""
    text = expected.split(" ", 1)[1] if " " in expected else "null"
    text = re.sub(r"\[\s*\.\.\.\s*\]", "[]", text)
    return json.loads(re.sub(r",\s*\.\.\.", "", text))


def operation(method: str, path: str) -> dict[str, Any]:
    """The OpenAPI operation a request reaches: the route with the fewest parameters that
    matches, as the router would choose a literal segment over a parameter."""
    matches: list[tuple[int, dict[str, Any]]] = []
    for template, methods in OPENAPI["paths"].items():
        pattern = re.sub(r"\{[^}]+\}", "[^/]+", template)
        if re.fullmatch(pattern, path) and method.lower() in methods:
            matches.append((template.count("{"), methods[method.lower()]))
    assert matches, f"no route {method} {path}"
    return min(matches, key=lambda match: match[0])[1]


EXAMPLES = [
    pytest.param(step, id=f"{block.page}:{step.command.splitlines()[0][:70]}")
    for page in PAGES
    for block in blocks(page)
    if block.language == "sh"
    for step in steps(block)
]


def test_the_docs_give_examples() -> None:
    assert len(EXAMPLES) >= 50


@pytest.mark.parametrize("step", EXAMPLES)
def test_an_example_sends_and_shows_only_fields_the_api_defines(step: Step) -> None:
    request = request_of(step.command)
    found = operation(request.method, request.path)
    if request.body is not None:
        schema = found["requestBody"]["content"]["application/json"]["schema"]
        assert unknown_fields(request.body, schema) == [], step.command
    status = step.status()
    assert status is not None, f"{step.command}: no answer written after it"
    answered = found["responses"][str(status)]
    for content in answered.get("content", {}).values():
        sketch = sketched_answer(step.expected or "")
        assert unknown_fields(sketch, content.get("schema", {})) == [], step.expected
