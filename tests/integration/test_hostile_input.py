"""Hostile or odd input gets a clear problem+json answer: never a 500, never a partial row."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.stack import ADMIN
from tests.fixtures.waiting import count_rows

PROBLEM = "application/problem+json"


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/endpoints", {"url": "http://127.0.0.1/", "description": "a\x00b"}),
        ("POST", "/v1/endpoints", {"url": "http://127.0.0.1/\x00"}),
        ("POST", "/v1/deliveries", {"endpoint_id": "ep\x00", "event_type": "a", "payload": {}}),
        ("GET", "/v1/deliveries/a%00b", None),
        ("GET", "/v1/deliveries/a%00b/attempts", None),
        ("POST", "/v1/deliveries/a%00b/redrive", None),
        ("GET", "/v1/endpoints/a%00b", None),
        ("PATCH", "/v1/endpoints/a%00b", {"description": "x"}),
        ("DELETE", "/v1/endpoints/a%00b", None),
        ("GET", "/v1/deliveries?endpoint_id=%00", None),
        ("POST", "/v1/reconcile", {"trigger": "cr\x00n"}),
    ],
)
async def test_nul_bytes_are_refused_cleanly(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    method: str,
    path: str,
    body: Any,
) -> None:

    headers = ADMIN if path.startswith("/v1/reconcile") else tenant
    response = await client.request(method, path, json=body, headers=headers)
    assert response.status_code in (404, 422), (path, response.status_code, response.text)
    assert response.headers["content-type"] == PROBLEM


@pytest.mark.parametrize("raw", [b'{"x": "\\ud800"}', b'{"\\udfff": 1}'])
async def test_unpaired_surrogates_in_the_payload_are_422(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    raw: bytes,
) -> None:
    body = b'{"endpoint_id": "%s", "event_type": "a", "payload": %s}' % (
        endpoint["id"].encode(),
        raw,
    )
    response = await client.post(
        "/v1/deliveries", content=body, headers={**tenant, "Content-Type": "application/json"}
    )
    assert response.status_code == 422 and response.headers["content-type"] == PROBLEM
    assert await count_rows(engine, "events") == 0


@pytest.mark.parametrize(
    "when",
    [
        "0001-01-01T00:00:00Z",
        "0001-01-01T00:00:00+14:00",  # year 0 in UTC
        "9999-12-31T23:59:59-14:00",  # year 10000 in UTC
        "2999-01-01T00:00:00Z",
    ],
)
async def test_out_of_range_deliver_after_is_422_or_now(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any], when: str
) -> None:
    response = await client.post(
        "/v1/deliveries",
        json={
            "endpoint_id": endpoint["id"],
            "event_type": "a",
            "payload": {},
            "deliver_after": when,
        },
        headers=tenant,
    )
    if when.endswith("Z") and when.startswith("0001"):
        assert response.status_code == 202  # the distant past means "now"
    else:
        assert response.status_code == 422 and response.headers["content-type"] == PROBLEM


async def test_oversized_chunked_body_is_413(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    big = json.dumps(
        {"endpoint_id": endpoint["id"], "event_type": "a", "payload": {"b": "x" * 1_000_000}}
    ).encode()

    async def chunks() -> Any:
        for start in range(0, len(big), 65536):
            yield big[start : start + 65536]

    response = await client.post(
        "/v1/deliveries", content=chunks(), headers={**tenant, "Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert response.headers["content-type"] == PROBLEM
