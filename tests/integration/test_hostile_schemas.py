"""A tenant's schema is a program Herald runs on the API's loop: the ones whose check (or whose
explanation of a failure) could cost more than a check may are refused when saved, and a
payload too large for its schema's bound is refused before it is checked -- with the reason,
and counted in herald_program_budget_exceeded_total{program="schema"}."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import new_endpoint
from tests.fixtures.waiting import count_rows


def fan(depth: int) -> dict[str, Any]:
    """A schema that fans out: each level two branches sharing one $ref to the next, the last
    matching nothing -- 2**depth checks of one value, about 70 bytes a level."""
    levels: dict[str, Any] = {
        f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(depth)
    }
    levels[f"d{depth}"] = {"not": {}}
    return {"$defs": levels, "$ref": "#/$defs/d0"}


MIXED_ENUM = {"type": "array", "items": {"enum": [*map(str, range(8000)), 1.5]}}


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        # 1,105 bytes; accepting {} against it took 15 s, freezing every tenant's requests.
        (fan(15), "a schema may take at most"),
        (fan(40), "a schema may take at most"),
        # Compared value by value: 8,000 values for each element of a payload's array.
        (MIXED_ENUM, "a schema may take at most"),
        # In place, back to itself: no part of the payload is ever reached.
        ({"$ref": "#"}, "refers back to itself without going into the payload"),
        ({"anyOf": [{"type": "null"}, {"$ref": "#/anyOf/0"}, {"$ref": "#"}]}, "refers back"),
        # What would make a $ref mean another place, or a pattern backtrack.
        ({"$defs": {"a": {"$anchor": "a"}}, "$ref": "#a"}, "JSON pointer (#/...)"),
        ({"$defs": {"a": {"$anchor": "a"}}}, "$anchor is not supported"),
        ({"properties": {"a": {"$id": "https://x.example/", "$ref": "#/b"}}}, "$id may appear"),
        ({"$dynamicRef": "#/$defs/x"}, "$dynamicRef is not supported"),
        ({"type": "string", "pattern": "(a+)+(?=b)"}, "not a valid JSON Schema"),
    ],
)
async def test_a_schema_whose_cost_has_no_bound_is_refused_when_saved(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine, schema: Any, says: str
) -> None:
    response = await client.post(
        "/v1/event-types", json={"name": "a.b", "schema": schema}, headers=tenant
    )
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith("body.schema: ")
    assert says in response.json()["detail"], response.json()["detail"]
    assert await count_rows(engine, "event_types") == 0


async def test_a_fan_of_branches_within_bounds_is_explained_by_naming_the_rule(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    # Small enough to save; the validator's own report of {} would list all 2**8 branches.
    # Herald names the first rule that fails, where it fails.
    saved = await client.post(
        "/v1/event-types", json={"name": "a.b", "schema": fan(8)}, headers=tenant
    )
    assert saved.status_code == 201, saved.text
    endpoint = await new_endpoint(client, tenant)
    body = {"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {}}
    refused = await client.post("/v1/deliveries", json=body, headers=tenant)
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"] == (
        "payload does not match the schema of event type a.b (version 1): "
        'at /: fails the schema\'s "anyOf" rule'
    )


async def test_a_payload_too_large_for_its_schemas_bound_is_refused_unchecked(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    # Every element compared with 20 values of mixed types: fine for a short list, over
    # the budget for a long one -- refused before any of it is compared, and counted.
    listed = {"type": "array", "items": {"enum": [*map(str, range(19)), None]}}
    schema = {"type": "object", "properties": {"list": listed}}
    saved = await client.post(
        "/v1/event-types", json={"name": "a.b", "schema": schema}, headers=tenant
    )
    assert saved.status_code == 201, saved.text
    before = budget_refusals()

    def event(length: int) -> dict[str, Any]:
        return {"event_type": "a.b", "payload": {"list": ["7"] * length}}

    fine = await client.post("/v1/events", json=event(10), headers=tenant)
    assert fine.status_code == 202, fine.text
    large = await client.post("/v1/events", json=event(20_000), headers=tenant)
    assert large.status_code == 422, large.text
    detail = large.json()["detail"]
    assert detail.startswith(
        "payload is too large to be checked against the schema of event type a.b (version 1): "
    ), detail
    assert "over the budget of a check" in detail
    assert budget_refusals() == before + 1
    assert await count_rows(engine, "events") == 1  # the fine one only


def budget_refusals() -> float:
    labels = {"program": "schema"}
    return REGISTRY.get_sample_value("herald_program_budget_exceeded_total", labels) or 0.0
