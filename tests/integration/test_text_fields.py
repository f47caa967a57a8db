"""Text PostgreSQL cannot hold -- NUL, and an unpaired UTF-16 surrogate -- is refused in words
in every string field of every request body, never a 500 and never a row half-written.

The fields are not listed here: they are read from the API's own OpenAPI document, so a field
a new feature adds meets this test without anyone remembering it. Each route is sent a body
that it accepts, with one string field at a time replaced by the hostile text.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import new_endpoint
from tests.fixtures.stack import ADMIN
from tests.fixtures.waiting import count_rows

SPEC = json.loads((Path(__file__).parents[2] / "openapi" / "openapi.json").read_text())
SCHEMAS = SPEC["components"]["schemas"]
HOSTILE = {"NUL": "a\x00b", "surrogate": "a\ud800b"}
# Bodies each route accepts, the fields a test replaces included where they are optional.
ENDPOINT = {
    "url": "http://127.0.0.1:9/hook",
    "description": "d",
    "filter": "true",
    "transformation": '{"body": {"text": type}}',
    "headers": {"X-Team": "t"},
    "secret_headers": {"X-Key": "k"},
    "event_types": ["a.b"],
    "customer_id": "cus-1",
    "oauth2": {"token_url": "http://127.0.0.1:9/token", "client_id": "c", "client_secret": "s"},
}
VALID: dict[tuple[str, str], Any] = {
    ("POST", "/v1/api-keys"): {"label": "l"},
    ("PUT", "/v1/customers/{customer_id}"): {"name": "n"},
    ("POST", "/v1/deliveries"): {
        "endpoint_id": "{endpoint_id}",
        "event_type": "a.b",
        "payload": {"k": "v"},
        "ordering_key": "o",
    },
    ("POST", "/v1/deliveries/batch"): {
        "items": [{"endpoint_id": "{endpoint_id}", "event_type": "a.b", "payload": {"k": "v"}}]
    },
    ("POST", "/v1/deliveries/redrive"): {"endpoint_id": "{endpoint_id}", "event_type": "a.b"},
    ("POST", "/v1/endpoints"): ENDPOINT,
    ("PATCH", "/v1/endpoints/{endpoint_id}"): {
        k: v for k, v in ENDPOINT.items() if k != "customer_id"
    },
    ("POST", "/v1/endpoints/{endpoint_id}/test-events"): {
        "event_type": "herald.test",
        "payload": {"k": "v"},
    },
    ("POST", "/v1/endpoints/{endpoint_id}/poll/ack"): {
        "receipts": ["dlv_01JF3Q6W9ZKTR8V4M2N5PXC7BD.0123456789abcdef0123456789abcdef"]
    },
    ("POST", "/v1/endpoints/{endpoint_id}/transformation/test"): {
        "transformation": '{"body": {"k": payload.k}}',
        "event_type": "a.b",
        "payload": {"k": "v"},
    },
    ("POST", "/v1/event-types"): {
        "name": "c.d",
        "description": "d",
        "schema": {"type": "object", "properties": {"k": {"const": "v"}}},
    },
    ("PATCH", "/v1/event-types/{name}"): {"description": "d", "schema": {"const": "v"}},
    ("POST", "/v1/events"): {"event_type": "a.b", "payload": {"k": "v"}, "customer_id": "cus-1"},
    ("POST", "/v1/portal-sessions"): {"customer_id": "cus-1"},
    ("POST", "/v1/portal-sessions/revoke"): {"customer_id": "cus-1"},
    ("PUT", "/v1/portal-settings"): {
        "name": "n",
        "accent_color": "#112233",
        "allowed_origins": ["https://a.example"],
        "logo_url": "https://a.example/logo.png",
    },
    ("PATCH", "/v1/portal-settings"): {
        "name": "n",
        "accent_color": "#112233",
        "allowed_origins": ["https://a.example"],
        "logo_url": "https://a.example/logo.png",
    },
    ("POST", "/v1/reconcile"): {"trigger": "cron"},
    ("POST", "/v1/tenants"): {"name": "n"},
    ("PATCH", "/v1/tenant"): {"cloudevents_source": "https://a.example/s"},
    ("PATCH", "/v1/tenants/{tenant_id}/limits"): {"max_endpoints": 10},
}
# Where a NUL is data, not text: a payload is stored as the JSON bytes it was sent as, where a
# NUL is the escape \u0000; a schema's constants are JSON values a payload is compared with.
AS_JSON = ("payload",)


def _resolved(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = SCHEMAS[schema["$ref"].split("/")[-1]]
    return schema


def _string_fields(schema: dict[str, Any], at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a body of this schema where a string goes: a property, an item of an
    array, a key or a value of a free-form object."""
    schema = _resolved(schema)
    for option in schema.get("anyOf", []) + schema.get("oneOf", []):
        yield from _string_fields(option, at)
    kind = schema.get("type")
    if kind == "string":
        yield at
    elif kind == "array" and "items" in schema:
        yield from _string_fields(schema["items"], (*at, 0))
    elif kind == "object":
        for name, part in schema.get("properties", {}).items():
            yield from _string_fields(part, (*at, name))
        free = schema.get("additionalProperties")
        if not schema.get("properties") and free is not False:
            yield (*at, "{key}")
            yield (*at, "{value}")


def _cases() -> Iterator[Any]:
    for path, operations in SPEC["paths"].items():
        for method, operation in operations.items():
            body = operation.get("requestBody")
            if body is None:
                continue
            route = (method.upper(), path)
            assert route in VALID, f"{route} takes a body: give this test one it accepts"
            schema = body["content"]["application/json"]["schema"]
            if path == "/v1/deliveries/batch":  # items are read one by one, as intents
                schema = {"properties": {"items": {"items": {"$ref": "#/DeliveryIntent"}}}}
                schema["type"] = "object"
                schema["properties"]["items"]["type"] = "array"
            fields = sorted(set(_string_fields(schema)), key=str)
            for field in fields:
                if set(field) & set(AS_JSON):
                    continue
                for name in HOSTILE:
                    yield pytest.param(route, field, name, id=f"{method} {path} {field} {name}")


def _poisoned(body: Any, field: tuple[Any, ...], text: str) -> Any:
    """``body`` with the string at ``field`` replaced by ``text`` (made where it is missing)."""
    body = copy.deepcopy(body)
    *parents, last = field
    node = body
    for part, below in zip(parents, field[1:], strict=True):
        if isinstance(part, int):
            node = node[part] if node else node.append({}) or node[0]
        else:
            node = node.setdefault(part, [] if isinstance(below, int) else {})
    if last == "{key}":
        node[text] = "v"
    elif last == "{value}":
        node["k"] = text
    elif isinstance(last, int):
        node[:] = [text]
    else:
        node[last] = text
    return body


async def _own(client: httpx.AsyncClient, tenant: dict[str, str]) -> str:
    return str((await client.get("/v1/limits", headers=tenant)).json()["tenant_id"])


def _filled(template: Any, ids: dict[str, str]) -> Any:
    return json.loads(json.dumps(template).replace("{endpoint_id}", ids["endpoint_id"]))


@pytest.mark.parametrize(("route", "field", "hostile"), list(_cases()))
async def test_text_postgresql_cannot_hold_is_refused_in_words(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    route: tuple[str, str],
    field: tuple[Any, ...],
    hostile: str,
) -> None:
    method, path = route
    await client.put("/v1/customers/cus-1", json={}, headers=tenant)
    await client.post("/v1/event-types", json={"name": "a.b"}, headers=tenant)
    ids = {"endpoint_id": endpoint["id"]}
    url = path.format(
        endpoint_id=endpoint["id"],
        customer_id="cus-2",
        name="a.b",
        tenant_id=await _own(client, tenant),
    )
    headers = ADMIN if path.startswith(("/v1/tenants", "/v1/reconcile")) else tenant
    valid = _filled(VALID[route], ids)
    tables = ("endpoints", "events", "deliveries", "customers", "event_types", "tenants")
    before = {table: await count_rows(engine, table) for table in tables}

    # Encoded as a client's JSON library does: an unpaired surrogate as its \\u escape.
    body = json.dumps(_poisoned(valid, field, HOSTILE[hostile])).encode()
    headers = {**headers, "Content-Type": "application/json"}
    response = await client.request(method, url, content=body, headers=headers)

    if path == "/v1/deliveries/batch":  # a batch answers for each item
        assert response.status_code == 200, response.text
        (item,) = response.json()["items"]
        assert item["status"] == 422, item
        problem = item["error"]
    else:
        assert response.status_code == 422, (response.status_code, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
    # In words, naming the field, and without repeating the input.
    named = [part for part in field if isinstance(part, str) and part != "items"]
    assert named[0] in problem["detail"], problem["detail"]
    assert HOSTILE[hostile] not in problem["detail"]
    assert {table: await count_rows(engine, table) for table in tables} == before


@pytest.mark.parametrize("route", sorted(VALID))
async def test_each_route_accepts_the_body_this_test_starts_from(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    route: tuple[str, str],
) -> None:
    """Without this, a hostile field could be refused for another field's fault."""
    method, path = route
    await client.put("/v1/customers/cus-1", json={}, headers=tenant)
    await client.post("/v1/event-types", json={"name": "a.b"}, headers=tenant)
    if path.endswith("/poll/ack"):  # only a polling endpoint is acknowledged
        endpoint = await new_endpoint(client, tenant, url=None, delivery="poll")
    url = path.format(
        endpoint_id=endpoint["id"],
        customer_id="cus-2",
        name="a.b",
        tenant_id=await _own(client, tenant),
    )
    headers = ADMIN if path.startswith(("/v1/tenants", "/v1/reconcile")) else tenant
    response = await client.request(
        method, url, json=_filled(VALID[route], {"endpoint_id": endpoint["id"]}), headers=headers
    )
    assert response.status_code < 300, (route, response.text)


# Where the text is a program, the hostile character must sit where the program allows any
# text -- inside a literal -- or the program's own parser refuses it first. There the filter
# compiles: only the text rule stops it before PostgreSQL, which would refuse it after
# validation had passed.
PROGRAMS = [
    (
        "POST",
        "/v1/endpoints",
        lambda text: {**ENDPOINT, "filter": f'payload.a == "{text}"'},
    ),
    (
        "PATCH",
        "/v1/endpoints/{endpoint_id}",
        lambda text: {"filter": f'type != "{text}"'},
    ),
    (
        "PATCH",
        "/v1/endpoints/{endpoint_id}",
        lambda text: {"transformation": f'{{"body": {{"a": "{text}"}}}}'},
    ),
    ("POST", "/v1/event-types", lambda text: {"name": "c.d", "schema": {"const": text}}),
    ("POST", "/v1/event-types", lambda text: {"name": "c.d", "schema": {"properties": {text: {}}}}),
    ("PATCH", "/v1/event-types/{name}", lambda text: {"schema": {"enum": ["x", text]}}),
    ("PATCH", "/v1/event-types/{name}", lambda text: {"schema": {"description": text}}),
]


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
@pytest.mark.parametrize(("method", "path", "body_of"), PROGRAMS)
async def test_text_postgresql_cannot_hold_is_refused_inside_a_program(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    method: str,
    path: str,
    body_of: Any,
    hostile: str,
) -> None:
    await client.put("/v1/customers/cus-1", json={}, headers=tenant)
    await client.post("/v1/event-types", json={"name": "a.b"}, headers=tenant)
    url = path.format(endpoint_id=endpoint["id"], name="a.b")
    before = {t: await count_rows(engine, t) for t in ("endpoints", "event_types")}
    as_it_was = (await client.get(url, headers=tenant)).json() if method == "PATCH" else None
    body = json.dumps(body_of(HOSTILE[hostile])).encode()
    response = await client.request(
        method, url, content=body, headers={**tenant, "Content-Type": "application/json"}
    )
    assert response.status_code == 422, (response.status_code, response.text)
    detail = response.json()["detail"]
    # Pydantic refuses an unpaired surrogate in a string field itself ("not a valid string").
    assert "PostgreSQL cannot store" in detail or "valid string" in detail, detail
    assert HOSTILE[hostile] not in detail, detail
    assert {t: await count_rows(engine, t) for t in ("endpoints", "event_types")} == before
    if as_it_was is not None:  # nothing of the change was written
        assert (await client.get(url, headers=tenant)).json() == as_it_was


# In a URL: NUL percent-encoded, and bytes that are no UTF-8 (a surrogate's, a lone 0xFF).
URL_HOSTILE = {"NUL": "a%00b", "surrogate": "a%ED%A0%80b", "not UTF-8": "a%FFb"}


def _parameter_cases() -> Iterator[Any]:
    for path, operations in SPEC["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                if parameter["in"] not in ("query", "path"):
                    continue
                for name in URL_HOSTILE:
                    yield pytest.param(
                        method.upper(), path, parameter["in"], parameter["name"], name,
                        id=f"{method} {path} {parameter['in']}:{parameter['name']} {name}",
                    )  # fmt: skip


@pytest.mark.parametrize(("method", "path", "where", "name", "hostile"), list(_parameter_cases()))
async def test_text_postgresql_cannot_hold_in_a_url_is_refused_in_words(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    method: str,
    path: str,
    where: str,
    name: str,
    hostile: str,
) -> None:
    text = URL_HOSTILE[hostile]
    values = {"endpoint_id": endpoint["id"], "customer_id": "cus-1", "name": "a.b"}
    values = {
        key: text if (where, key) == ("path", name) else value for key, value in values.items()
    }
    url = re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), text), path)
    if where == "query":
        url = f"{url}?{name}={text}"
    headers = ADMIN if path.startswith(("/v1/tenants", "/v1/reconcile")) else tenant
    response = await client.request(method, url, headers=headers)
    assert response.status_code < 500, (url, response.status_code, response.text)
    if response.status_code >= 400:
        assert response.headers["content-type"] == "application/problem+json", response.text
