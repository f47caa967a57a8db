"""Bodies Herald cannot take get an answer that says why -- how deep, how big, what media type,
where the JSON broke -- with the limit that applies, and never a 500."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.cli.openapi import openapi_document
from app.core.config import Settings
from app.core.fields import MAX_PAYLOAD_DEPTH
from app.main import create_app
from tests.fixtures.processes import start_api, wait_healthy
from tests.fixtures.stack import ADMIN, Stack, client_for
from tests.fixtures.waiting import count_rows

PROBLEM = "application/problem+json"
JSON = {"Content-Type": "application/json"}


def nested(depth: int) -> dict[str, Any]:
    """A JSON object ``depth`` levels deep: ``{"a": {"a": ... {"a": 1}}}``."""
    payload: dict[str, Any] = {"a": 1}
    for _ in range(depth - 1):
        payload = {"a": payload}
    return payload


def nested_text(depth: int) -> str:
    """The same, as text: too deep for ``json.dumps`` to write past ~1000 levels."""
    return '{"a":' * (depth - 1) + '{"a":1' + "}" * depth


def intent(route: str, endpoint_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"event_type": "deep.test", "payload": payload}
    return {"endpoint_id": endpoint_id, **body} if route == "/v1/deliveries" else body


@pytest.mark.parametrize("route", ["/v1/deliveries", "/v1/events"])
@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
async def test_a_payload_nested_too_deep_is_422_with_or_without_a_key(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    route: str,
    keyed: bool,
) -> None:
    headers = {**tenant, **({"Idempotency-Key": "deep"} if keyed else {})}
    response = await client.post(
        route, json=intent(route, endpoint["id"], nested(300)), headers=headers
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    assert f"at most {MAX_PAYLOAD_DEPTH} levels" in response.json()["detail"]
    assert await count_rows(engine, "events") == 0
    assert await count_rows(engine, "idempotency_keys") == 0


async def test_the_depth_limit_is_exact(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    deepest = intent("/v1/deliveries", endpoint["id"], nested(MAX_PAYLOAD_DEPTH))
    assert (await client.post("/v1/deliveries", json=deepest, headers=tenant)).status_code == 202
    # A list counts as a level like an object does.
    one_more = intent("/v1/deliveries", endpoint["id"], {"list": [nested(MAX_PAYLOAD_DEPTH - 1)]})
    refused = await client.post("/v1/deliveries", json=one_more, headers=tenant)
    assert refused.status_code == 422, refused.text


async def test_a_too_deep_batch_item_fails_alone(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any], engine: AsyncEngine
) -> None:
    items = [
        {**intent("/v1/deliveries", endpoint["id"], {"n": n}), "idempotency_key": f"k{n}"}
        for n in range(3)
    ]
    items[1]["payload"] = nested(300)
    response = await client.post("/v1/deliveries/batch", json={"items": items}, headers=tenant)
    assert response.status_code == 200, response.text
    results = response.json()["items"]
    assert [r["status"] for r in results] == [202, 422, 202]
    assert f"at most {MAX_PAYLOAD_DEPTH} levels" in results[1]["error"]["detail"]
    assert await count_rows(engine, "deliveries") == 2
    assert await count_rows(engine, "idempotency_keys", "key = 'k1'") == 0


@pytest.mark.parametrize("route", ["/v1/deliveries", "/v1/events", "/v1/deliveries/batch"])
async def test_a_body_too_deep_to_parse_names_the_limit(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any], route: str
) -> None:
    payload = nested_text(5000)
    if route == "/v1/deliveries/batch":
        body = f'{{"items": [{{"endpoint_id": "{endpoint["id"]}", "event_type": "a", '
        body += f'"payload": {payload}}}]}}'
    else:
        body = json.dumps(intent(route, endpoint["id"], {}))[:-3] + payload + "}"
    response = await client.post(route, content=body, headers={**tenant, **JSON})
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    assert f"at most {MAX_PAYLOAD_DEPTH} levels" in response.json()["detail"]


async def test_a_body_that_is_not_utf8_says_so(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    response = await client.post(
        "/v1/deliveries", content=b'{"endpoint_id": "\xff"}', headers={**tenant, **JSON}
    )
    assert response.status_code == 400
    assert "not valid UTF-8" in response.json()["detail"]


@pytest.mark.parametrize("coding", ["gzip", "br, gzip"])
async def test_a_compressed_body_is_415_saying_send_it_uncompressed(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any], coding: str
) -> None:
    body = gzip.compress(json.dumps(intent("/v1/deliveries", endpoint["id"], {})).encode())
    response = await client.post(
        "/v1/deliveries", content=body, headers={**tenant, **JSON, "Content-Encoding": coding}
    )
    assert response.status_code == 415, response.text
    assert response.headers["content-type"] == PROBLEM
    assert response.headers["accept-encoding"] == "identity"
    named = f"Content-Encoding: {coding}" if coding == "gzip" else "a Content-Encoding"
    assert response.json()["detail"] == (
        f"the request body is sent with {named}; send it uncompressed"
    )


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ('{"amount": 1e999}', "payload.amount"),
        ('{"a": [1, {"b": -1e400}]}', "payload.a[1].b"),
        ('{"n": NaN}', "payload.n"),
        ('{"n": Infinity}', "payload.n"),
    ],
)
async def test_a_number_json_cannot_carry_is_named_where_it_is(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    raw: str,
    where: str,
) -> None:
    before = await count_rows(engine, "deliveries")
    body = json.dumps(intent("/v1/deliveries", endpoint["id"], {}))[:-3] + raw + "}"
    response = await client.post("/v1/deliveries", content=body, headers={**tenant, **JSON})
    assert response.status_code == 422, response.text
    assert response.json()["detail"] == (
        f"{where} is not a number JSON can carry: beyond a double's range (about 1.8e308), "
        "or NaN or Infinity"
    )
    assert await count_rows(engine, "deliveries") == before


async def _exchange(
    streams: tuple[asyncio.StreamReader, asyncio.StreamWriter], request: bytes
) -> tuple[int, dict[str, str], bytes]:
    """One request and its response on an open HTTP/1.1 connection."""
    reader, writer = streams
    writer.write(request)
    await writer.drain()
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    status = int(head[0].split()[1])
    headers = dict(line.lower().split(": ", 1) for line in head[1:] if line)
    return status, headers, await reader.readexactly(int(headers["content-length"]))


def _request(method: str, path: str, host: str, headers: dict[str, str], body: bytes) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def _keep_alive_after(
    base_url: str, method: str, path: str, headers: dict[str, str], body: bytes = b""
) -> int:
    """Send one request, then ``GET /healthz`` on the same connection; the first's status.

    The connection must stay usable: a server that is done with it says ``Connection: close``
    rather than dropping it under the client's next request."""
    url = urlsplit(base_url)
    assert url.hostname is not None and url.port is not None
    streams = await asyncio.open_connection(url.hostname, url.port)
    try:
        status, first, _ = await _exchange(
            streams, _request(method, path, url.netloc, headers, body)
        )
        assert first.get("connection") != "close", first
        after, _, _ = await _exchange(streams, _request("GET", "/healthz", url.netloc, {}, b""))
        assert after == 200
        return status
    finally:
        streams[1].close()


async def test_over_http_a_deep_keyed_payload_is_422_and_the_connection_lives_on(
    stack: Stack, tmp_path: Path
) -> None:
    api = start_api(stack, tmp_path)
    try:
        await wait_healthy(api)
        async with httpx.AsyncClient(base_url=api.base_url) as http:
            created = await http.post("/v1/tenants", json={"name": "deep"}, headers=ADMIN)
            tenant = {"Authorization": f"Bearer {created.json()['api_key']}"}
            endpoint = await http.post(
                "/v1/endpoints", json={"url": "http://127.0.0.1:9/hook"}, headers=tenant
            )
        body = json.dumps(intent("/v1/deliveries", endpoint.json()["id"], nested(300)))
        headers = {**tenant, **JSON, "Idempotency-Key": "deep"}
        status = await _keep_alive_after(
            api.base_url, "POST", "/v1/deliveries", headers, body.encode()
        )
        assert status == 422
    finally:
        api.stop()


async def test_over_http_an_unexpected_error_is_500_and_the_connection_lives_on(
    stack: Stack, tmp_path: Path, engine: AsyncEngine
) -> None:
    api = start_api(stack, tmp_path)
    try:
        await wait_healthy(api)
        async with httpx.AsyncClient(base_url=api.base_url) as http:
            created = await http.post("/v1/tenants", json={"name": "broken"}, headers=ADMIN)
            tenant = {"Authorization": f"Bearer {created.json()['api_key']}"}
            endpoint = await http.post(
                "/v1/endpoints", json={"url": "http://127.0.0.1:9/hook"}, headers=tenant
            )
        # A real fault, not a mock: a row no code path writes, which the endpoint's answer
        # cannot be built from.
        async with engine.begin() as connection:
            await connection.execute(text("UPDATE endpoints SET event_types = ARRAY[NULL]::text[]"))
        path = f"/v1/endpoints/{endpoint.json()['id']}"
        assert await _keep_alive_after(api.base_url, "GET", path, tenant) == 500
    finally:
        api.stop()
    assert "request.failed" in api.output()


async def test_malformed_json_says_what_was_expected_and_where(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    body = '{\n  "endpoint_id": "ep_x"\n  "event_type": "a"\n}'  # no comma after line 2
    response = await client.post("/v1/deliveries", content=body, headers={**tenant, **JSON})
    assert response.status_code == 422
    assert response.headers["content-type"] == PROBLEM
    detail = response.json()["detail"]
    assert "not valid JSON" in detail
    assert "expected ',' or the closing } or ]" in detail and "line 3, column 3" in detail


# Every route that reads a JSON body, with who may call it.
JSON_ROUTES = [
    ("POST", "/v1/tenants", "admin"),
    ("POST", "/v1/endpoints", "tenant"),
    ("PATCH", "/v1/endpoints/ep_x", "tenant"),
    ("POST", "/v1/endpoints/ep_x/test-events", "tenant"),
    ("POST", "/v1/endpoints/ep_x/transformation/test", "tenant"),
    ("POST", "/v1/endpoints/ep_x/poll/ack", "tenant"),
    ("POST", "/v1/deliveries", "tenant"),
    ("POST", "/v1/deliveries/batch", "tenant"),
    ("POST", "/v1/deliveries/redrive", "tenant"),
    ("POST", "/v1/events", "tenant"),
    ("POST", "/v1/reconcile", "admin"),
    ("POST", "/v1/api-keys", "tenant"),
    ("POST", "/v1/event-types", "tenant"),
    ("PATCH", "/v1/event-types/order.paid", "tenant"),
    ("PUT", "/v1/customers/acme", "tenant"),
    ("POST", "/v1/portal-sessions", "tenant"),
    ("PUT", "/v1/portal-settings", "tenant"),
    ("PATCH", "/v1/portal-settings", "tenant"),
    ("POST", "/v1/portal-sessions/revoke", "tenant"),
    ("PATCH", f"/v1/tenants/ten_{'0' * 26}/limits", "admin"),
    ("PATCH", "/v1/tenant", "tenant"),
]


@pytest.mark.parametrize(("method", "path", "who"), JSON_ROUTES)
@pytest.mark.parametrize(
    "content_type", ["application/x-www-form-urlencoded", "text/plain", None], ids=str
)
async def test_a_body_that_is_not_json_is_415_naming_application_json(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    engine: AsyncEngine,
    method: str,
    path: str,
    who: str,
    content_type: str | None,
) -> None:
    headers = {**(ADMIN if who == "admin" else tenant)}
    if content_type is not None:
        headers["Content-Type"] = content_type
    # What `curl -d endpoint_id=ep_x` sends.
    response = await client.request(method, path, content=b"endpoint_id=ep_x", headers=headers)
    assert response.status_code == 415, response.text
    assert response.headers["content-type"] == PROBLEM
    assert "Content-Type: application/json" in response.json()["detail"]
    assert await count_rows(engine, "tenants") == 1  # only the fixture's


def test_every_route_with_a_body_is_listed_above_and_documents_415() -> None:
    with_body = {
        (
            method.upper(),
            path.replace("{endpoint_id}", "ep_x")
            .replace("{name}", "order.paid")
            .replace("{customer_id}", "acme")
            .replace("{tenant_id}", f"ten_{'0' * 26}"),
        )
        for path, operations in openapi_document()["paths"].items()
        for method, operation in operations.items()
        if "requestBody" in operation
    }
    assert with_body == {(method, path) for method, path, _ in JSON_ROUTES}
    for path, operations in openapi_document()["paths"].items():
        for operation in operations.values():
            if "requestBody" in operation:
                assert "415" in operation["responses"], path


async def test_json_media_types_with_parameters_or_suffixes_are_json(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    body = json.dumps(intent("/v1/deliveries", endpoint["id"], {})).encode()
    for content_type in ("application/json; charset=utf-8", "application/vnd.herald+json"):
        headers = {**tenant, "Content-Type": content_type}
        response = await client.post("/v1/deliveries", content=body, headers=headers)
        assert response.status_code == 202, (content_type, response.text)


async def test_an_oversized_body_names_the_setting_and_its_value(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    response = await client.post(
        "/v1/deliveries", content=b" " * 3_000_000, headers={**tenant, **JSON}
    )
    assert response.status_code == 413
    detail = response.json()["detail"]
    assert "3000000 bytes" in detail
    assert "HERALD_MAX_PAYLOAD_BYTES (262144)" in detail and "589824" in detail


async def test_an_oversized_batch_names_its_own_setting(
    settings: Settings, tenant: dict[str, str]
) -> None:
    app = create_app(settings.model_copy(update={"max_batch_bytes": 4096}))
    async with app.router.lifespan_context(app), client_for(app) as client:
        response = await client.post(
            "/v1/deliveries/batch", content=b" " * 5000, headers={**tenant, **JSON}
        )
    assert response.status_code == 413
    assert "HERALD_MAX_BATCH_BYTES (4096)" in response.json()["detail"]
