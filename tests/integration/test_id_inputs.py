"""Every id input follows the one id rule (app/core/ids.py): an id that cannot be one of ours is
404 in a path and 422 in a query or a body, in words, and never reaches PostgreSQL (where a NUL
byte is a 500, not "not found")."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from app.api.pagination import encode_cursor
from tests.fixtures.schema_inputs import request_fields
from tests.fixtures.stack import ADMIN
from tests.fixtures.waiting import count_rows

PROBLEM = "application/problem+json"
WELL_FORMED = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
# Junk that could arrive where an id is expected. Path junk is percent-encoded into the URL.
JUNK = [
    "\x00",
    "ep_\x00",
    f"ep_{WELL_FORMED}\x00",
    f"dlv_{WELL_FORMED[:-1]}\x00",
    " ",
    "nope",
    f"ep_{WELL_FORMED[:-1]}",  # one character short
    f"ep_{WELL_FORMED.lower()}",
    f"ep_{WELL_FORMED[:-1]}U",  # U is not a Crockford digit
    f"ep_{WELL_FORMED[:-1]}\u0130",  # a non-ASCII capital
    "x" * 5000,
    "'; DROP TABLE deliveries; --",
    "\ud800",  # an unpaired surrogate (JSON bodies only; see _junk_for_path)
]

PATH_ROUTES = [
    ("GET", "/v1/deliveries/{}"),
    ("GET", "/v1/deliveries/{}/attempts"),
    ("POST", "/v1/deliveries/{}/redrive"),
    ("POST", "/v1/deliveries/{}/retry"),
    ("POST", "/v1/deliveries/{}/cancel"),
    ("POST", "/v1/deliveries/{}/skip"),
    ("GET", "/v1/deliveries/redrive/{}"),
    ("GET", "/v1/endpoints/{}"),
    ("PATCH", "/v1/endpoints/{}"),
    ("DELETE", "/v1/endpoints/{}"),
    ("GET", "/v1/endpoints/{}/stats"),
    ("GET", "/v1/endpoints/{}/secret"),
    ("GET", "/v1/endpoints/{}/streams"),
    ("POST", "/v1/endpoints/{}/secret/rotate"),
    ("POST", "/v1/endpoints/{}/signing-key/rotate"),
    ("POST", "/v1/endpoints/{}/test"),
    ("POST", "/v1/endpoints/{}/test-events"),
    ("POST", "/v1/endpoints/{}/transformation/test"),
    ("GET", "/v1/endpoints/{}/poll"),
    ("POST", "/v1/endpoints/{}/poll/ack"),
    ("GET", "/v1/reconcile/runs/{}"),
    ("GET", "/v1/events/{}"),
    ("POST", "/v1/api-keys/{}/revoke"),
    ("DELETE", "/v1/portal-sessions/{}"),
    ("GET", "/v1/tenants/{}/limits"),
    ("PATCH", "/v1/tenants/{}/limits"),
]
KIND_OF = {
    "deliveries/redrive": "redrive job",
    "deliveries": "delivery",
    "endpoints": "endpoint",
    "events": "event",
    "api-keys": "API key",
    "portal-sessions": "portal session",
    "tenants": "tenant",
}


def _headers(path: str, tenant: dict[str, str]) -> dict[str, str]:
    return ADMIN if path.startswith(("/v1/reconcile", "/v1/tenants")) else tenant


def _kind(template: str) -> str:
    for prefix, kind in KIND_OF.items():
        if template.startswith(f"/v1/{prefix}/"):
            return kind
    return "reconcile run"


def _assert_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    problem: dict[str, Any] = response.json()
    return problem


def test_every_path_with_an_id_is_covered(app: FastAPI) -> None:
    in_app = {
        (method.upper(), re.sub(r"\{[a-z_]+\}", "{}", path))
        for path, operations in app.openapi()["paths"].items()
        # An event type's name (test_catalogue) and a customer's id (test_customers) are the
        # tenant's words, not Herald's ids.
        if "{" in path and "{name}" not in path and "{customer_id}" not in path
        for method in operations
    }
    assert in_app == set(PATH_ROUTES)


@pytest.mark.parametrize(("method", "template"), PATH_ROUTES)
@pytest.mark.parametrize(
    "junk", [*(j for j in JUNK if j.strip() and j != "\ud800"), f"evt_{WELL_FORMED}"]
)
async def test_junk_id_in_a_path_is_404_in_words(
    client: httpx.AsyncClient, tenant: dict[str, str], method: str, template: str, junk: str
) -> None:
    if template.startswith("/v1/events/") and junk.startswith("evt_"):
        junk = f"dlv_{WELL_FORMED}"  # the wrong kind of id, for the one path where evt_ is right
    path = template.format(quote(junk, safe=""))
    body = {"description": "x"} if method == "PATCH" else None
    response = await client.request(method, path, json=body, headers=_headers(path, tenant))
    problem = _assert_problem(response, 404)
    kind = _kind(template)
    assert problem["detail"].startswith(f"no such {kind}: the path does not hold a")
    assert "26 capital letters and digits" in problem["detail"]
    assert "\\u0000" not in response.text  # neither echoed in the detail nor in the instance


async def test_a_junk_path_id_still_needs_a_key_first(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/deliveries/%00")
    _assert_problem(response, 401)


def _delivery(value: str) -> dict[str, Any]:
    return {"endpoint_id": value, "event_type": "a", "payload": {}}


# Where an id goes in a body or a query: (method, path, its location in the problem, the field).
ID_FIELDS = [
    ("POST", "/v1/deliveries", "body.endpoint_id", "DeliveryIntent.endpoint_id"),
    ("POST", "/v1/deliveries/redrive", "body.endpoint_id", "RedriveFilter.endpoint_id"),
    ("GET", "/v1/deliveries", "query.endpoint_id", "GET /v1/deliveries?endpoint_id"),
    ("GET", "/v1/deliveries", "query.event_id", "GET /v1/deliveries?event_id"),
    ("GET", "/v1/api-keys", "query.tenant_id", "GET /v1/api-keys?tenant_id"),
    ("POST", "/v1/api-keys", "body.tenant_id", "ApiKeyCreate.tenant_id"),
    ("POST", "/v1/api-keys", "body.endpoint_id", "ApiKeyCreate.endpoint_id"),
    ("GET", "/v1/portal-sessions", "query.api_key_id", "GET /v1/portal-sessions?api_key_id"),
    ("POST", "/v1/portal-sessions/revoke", "body.api_key_id", "PortalSessionsRevoke.api_key_id"),
]
# What each id field must hold, as the problem says it.
MUST_BE = {
    "endpoint_id": "an endpoint id (ep_ followed by 26 capital letters and digits)",
    "event_id": "an event id (evt_ followed by 26 capital letters and digits)",
    "tenant_id": "a tenant id (ten_ followed by 26 capital letters and digits)",
    "api_key_id": "an API key id (key_ followed by 26 capital letters and digits)",
}
BODIES: dict[str, Callable[[str], dict[str, Any]]] = {
    "/v1/deliveries": _delivery,
    "/v1/deliveries/redrive": lambda v: {"endpoint_id": v},
    "/v1/api-keys": lambda v: {"tenant_id": v},
    "/v1/api-keys endpoint_id": lambda v: {"endpoint_id": v},
    "/v1/portal-sessions/revoke": lambda v: {"api_key_id": v},
}


def _as_json(body: Any, headers: dict[str, str]) -> dict[str, Any]:
    # Encoded here (ASCII, escaped) so that a lone surrogate survives the trip, as JSON allows.
    return {
        "content": json.dumps(body).encode(),
        "headers": {**headers, "Content-Type": "application/json"},
    }


def test_every_id_in_a_body_or_query_is_covered(app: FastAPI) -> None:
    # A customer's id is the tenant's, with its own rule (test_customers covers each field).
    ids = {
        name
        for name in request_fields(app)
        if name.endswith("_id") and not name.endswith("customer_id")
    }
    # A batch item is a DeliveryIntent with a key: its endpoint_id has a test of its own below.
    assert ids == {field for *_, field in ID_FIELDS} | {"BatchItem.endpoint_id"}
    cursors = {
        f"{method.upper()} {re.sub(r'{[a-z_]+}', '{}', path)}"
        for path, operations in app.openapi()["paths"].items()
        for method, operation in operations.items()
        if any(p["name"] == "cursor" for p in operation.get("parameters", []))
    }
    # Cursors over numbers and names: the attempts below, event types in test_catalogue,
    # streams by ordering key in test_stream_repair, customers by id in test_customers.
    others = {
        "GET /v1/customers",
        "GET /v1/deliveries/{}/attempts",
        "GET /v1/event-types",
        "GET /v1/endpoints/{}/streams",
    }
    assert cursors == {f"GET {path}" for path, _, _ in LISTS} | others


# A surrogate cannot be encoded into a URL, so it can only arrive in a JSON body.
@pytest.mark.parametrize(
    ("method", "path", "loc", "junk"),
    [
        (method, path, loc, junk)
        for method, path, loc, _ in ID_FIELDS
        for junk in [*JUNK, "", f"dlv_{WELL_FORMED}"]
        if not (loc.startswith("query") and junk == "\ud800")
    ],
)
async def test_junk_id_in_a_body_or_query_is_422_naming_the_field(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    engine: AsyncEngine,
    method: str,
    path: str,
    loc: str,
    junk: str,
) -> None:
    field = loc.split(".")[-1]
    if loc.startswith("query"):
        request: dict[str, Any] = {"params": {field: junk}, "headers": tenant}
    else:
        body = BODIES.get(f"{path} {field}", BODIES[path])
        request = _as_json(body(junk), tenant)
    response = await client.request(method, path, **request)
    problem = _assert_problem(response, 422)
    assert problem["detail"] == f"{loc}: must be {MUST_BE[field]}"
    for table in ("redrive_jobs", "events", "deliveries"):
        assert await count_rows(engine, table) == 0


@pytest.mark.parametrize("junk", [*JUNK, "", f"dlv_{WELL_FORMED}"])
async def test_junk_id_in_a_batch_item_fails_that_item_alone(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any], junk: str
) -> None:
    items = [_delivery(junk), _delivery(endpoint["id"])]
    response = await client.post("/v1/deliveries/batch", **_as_json({"items": items}, tenant))
    assert response.status_code == 200, response.text
    bad, good = response.json()["items"]
    assert good["status"] == 202
    assert bad["status"] == 422
    assert bad["error"]["detail"] == (
        "endpoint_id: must be an endpoint id (ep_ followed by 26 capital letters and digits)"
    )


LISTS = [
    ("/v1/deliveries", "dlv", False),
    ("/v1/endpoints", "ep", False),
    ("/v1/reconcile/runs", "run", True),
    ("/v1/api-keys", "key", False),
    ("/v1/tenants", "ten", True),
    ("/v1/portal-sessions", "pts", False),
    ("/v1/audit-records", "aud", False),
]


@pytest.mark.parametrize(("path", "prefix", "admin"), LISTS)
@pytest.mark.parametrize("junk", [j for j in JUNK if j != "\ud800"])
async def test_junk_cursor_is_422_naming_the_cursor(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    path: str,
    prefix: str,
    admin: bool,
    junk: str,
) -> None:
    headers = ADMIN if admin else tenant
    # Raw junk, junk dressed as a cursor, and a real-looking cursor over another kind of id.
    wrong_kind = "evt" if prefix != "evt" else "dlv"
    for cursor in (junk, encode_cursor(junk), encode_cursor(f"{wrong_kind}_{WELL_FORMED}")):
        response = await client.get(path, params={"cursor": cursor[:200]}, headers=headers)
        problem = _assert_problem(response, 422)
        assert problem["detail"] == (
            "query.cursor: must be a next_cursor this list returned, passed back unchanged"
        )


async def test_junk_attempts_cursor_is_422(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    created = await client.post("/v1/deliveries", json=_delivery(endpoint["id"]), headers=tenant)
    path = f"/v1/deliveries/{created.json()['id']}/attempts"
    for cursor in ("\x00", encode_cursor("\x00"), encode_cursor("9" * 20), "%%%"):
        response = await client.get(path, params={"cursor": cursor}, headers=tenant)
        _assert_problem(response, 422)


async def test_a_well_formed_unknown_id_is_404_everywhere_it_names_something(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    unknown = f"ep_{WELL_FORMED}"
    response = await client.post("/v1/deliveries", json=_delivery(unknown), headers=tenant)
    assert _assert_problem(response, 404)["detail"] == f"endpoint {unknown} not found"
    response = await client.get(f"/v1/endpoints/{unknown}", headers=tenant)
    _assert_problem(response, 404)
