"""POST /v1/deliveries is served by hand (app/api/served.py), not by FastAPI's generic handler.

It must answer every request exactly as the generic handler answers the same declaration: the
same status, the same problem, in the same order of checks. Here the endpoint function is also
mounted the generic way, beside the served route, and both get the same requests.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.core.config import Settings
from app.delivery.routes import deliveries
from app.delivery.schemas import DeliveryOut
from app.main import create_app
from tests.fixtures.stack import ADMIN, client_for

SERVED = "/v1/deliveries"
GENERIC = "/v1/deliveries-generic"
JSON = {"Content-Type": "application/json"}


@pytest.fixture
async def both(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A client of an app of its own (the shared one stays as built) with the endpoint also
    mounted the generic way, on the app's router: the app-wide dependency (415 for a body
    that is not JSON) applies to it too."""
    application = create_app(settings)
    application.router.add_api_route(
        GENERIC,
        deliveries.create_delivery,
        methods=["POST"],
        status_code=202,
        response_model=DeliveryOut,
    )
    async with application.router.lifespan_context(application), client_for(application) as http:
        yield http


def cases(endpoint_id: str, tenant: dict[str, str]) -> dict[str, tuple[bytes, dict[str, str]]]:
    good = json.dumps({"endpoint_id": endpoint_id, "event_type": "t", "payload": {"n": 1}})
    auth_json = {**tenant, **JSON}
    return {
        "accepted": (good.encode(), auth_json),
        "empty body": (b"", auth_json),
        "empty body, no content type": (b"", tenant),
        "malformed JSON": (b'{"endpoint_id": ', auth_json),
        "malformed JSON, no key": (b'{"endpoint_id": ', JSON),
        "text body": (good.encode(), {**tenant, "Content-Type": "text/plain"}),
        "no content type": (good.encode(), tenant),
        "a list": (b"[]", auth_json),
        "no fields": (b"{}", auth_json),
        "unknown field": (json.dumps({**json.loads(good), "x": 1}).encode(), auth_json),
        "junk endpoint id": (good.replace(endpoint_id, "nope").encode(), auth_json),
        "unknown endpoint": (
            good.replace(endpoint_id, "ep_01J00000000000000000000000").encode(),
            auth_json,
        ),
        "no API key": (good.encode(), JSON),
        "wrong scheme": (good.encode(), {"Authorization": "Basic x", **JSON}),
        "admin key": (good.encode(), {**ADMIN, **JSON}),
        "bad idempotency key": (good.encode(), {**auth_json, "Idempotency-Key": "a b\x01"}),
        "bad key and bad body": (b"{}", {**auth_json, "Idempotency-Key": ""}),
        "bad body, no API key": (b"{}", JSON),
        "not UTF-8": (b'{"endpoint_id": "\xff"}', auth_json),
        "too deep to parse": (b"[" * 100_000 + b"]" * 100_000, auth_json),
        "NaN in the payload": (good.replace('{"n": 1}', '{"n": NaN}').encode(), auth_json),
        "a number past a double": (good.replace('{"n": 1}', '{"n": 1e999}').encode(), auth_json),
        "a gzip body": (gzip.compress(good.encode()), {**auth_json, "Content-Encoding": "gzip"}),
        "payload too large": (
            good.replace('{"n": 1}', json.dumps({"big": "x" * 300_000})).encode(),
            auth_json,
        ),
    }


def comparable(response: httpx.Response) -> dict[str, Any]:
    """What a client sees, less what names the route or the new delivery."""
    seen: dict[str, Any] = {
        "status": response.status_code,
        "content-type": response.headers.get("content-type"),
        "replayed": response.headers.get(deliveries.REPLAYED_HEADER),
        "location": "location" in response.headers,
    }
    body = response.json()
    if response.is_success:
        seen["fields"] = sorted(body)
        seen["state"] = body["state"]
    else:
        seen["problem"] = {k: v for k, v in body.items() if k != "instance"}
    return seen


async def test_the_served_route_answers_as_the_generic_one(
    both: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    for name, (body, headers) in cases(endpoint["id"], tenant).items():
        served = await both.post(SERVED, content=body, headers=headers)
        generic = await both.post(GENERIC, content=body, headers=headers)
        assert comparable(served) == comparable(generic), name
        assert served.status_code < 500, name


async def test_keyed_accept_and_replay_answer_as_the_generic_route(
    both: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    intent = {"endpoint_id": endpoint["id"], "event_type": "t", "payload": {"n": 1}}
    for route, key in ((SERVED, "served-1"), (GENERIC, "generic-1")):
        headers = {**tenant, "Idempotency-Key": key}
        first = await both.post(route, json=intent, headers=headers)
        again = await both.post(route, json=intent, headers=headers)
        changed = await both.post(route, json={**intent, "event_type": "u"}, headers=headers)
        assert [first.status_code, again.status_code, changed.status_code] == [202, 200, 422]
        assert again.headers[deliveries.REPLAYED_HEADER] == "true"
        assert again.json()["id"] == first.json()["id"]
        assert first.headers["location"] == f"/v1/deliveries/{first.json()['id']}"
        assert again.headers["location"] == first.headers["location"]
