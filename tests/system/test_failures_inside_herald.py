"""An attempt that fails inside Herald -- a request it cannot build from its endpoint's row, an
error no handler foresaw -- is recorded for what it was, through a real `herald worker`: never
"worker shut down" (the worker did not), never a failure of the receiver (the breaker does not
count it), logged once per attempt without a header's value.

The rows are written straight into PostgreSQL, as an older release could have saved them before
its rules held the whole string (a header ending in a line break) or as a damaged row reads."""

from __future__ import annotations

import base64
import json
import secrets
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.sealing import KeyRing, new_key
from tests.fixtures.api import new_endpoint
from tests.fixtures.processes import HeraldProcess
from tests.fixtures.receiver import Receiver
from tests.fixtures.stack import SECRET_KEYS
from tests.fixtures.waiting import eventually

MAX_ATTEMPTS = 5  # tests.fixtures.processes.FAST_WORKER_ENV: four retries + 1


# Each column as an older release or a damaged row could hold it, written behind the API's back.
_WRITES = {
    "headers": "UPDATE endpoints SET headers = CAST(:value AS jsonb) WHERE id = :id",
    "secret": "UPDATE endpoints SET secret_sealed = :value WHERE id = :id",
    "url": "UPDATE endpoints SET url = :value WHERE id = :id",
}


async def write_endpoint(
    engine: AsyncEngine, endpoint_id: str, column: str, value: Any, ring: str = SECRET_KEYS
) -> None:
    """``value`` stored in ``column``; a secret sealed, as Herald stores it, under ``ring``."""
    stored = json.dumps(value) if column == "headers" else value
    if column == "secret":
        stored = KeyRing.parse(ring).seal(value, f"endpoint:{endpoint_id}:signing")
    async with engine.begin() as connection:
        await connection.execute(text(_WRITES[column]), {"value": stored, "id": endpoint_id})


async def finished(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint_id: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Deliver one intent to the endpoint and wait until it is dead; it and its attempt log."""
    accepted = await client.post(
        "/v1/deliveries",
        json={"endpoint_id": endpoint_id, "event_type": "order.paid", "payload": {"n": 1}},
        headers=tenant,
    )
    assert accepted.status_code == 202, accepted.text
    delivery_id = accepted.json()["id"]

    async def read() -> dict[str, Any]:
        body: dict[str, Any] = (
            await client.get(f"/v1/deliveries/{delivery_id}", headers=tenant)
        ).json()
        return body

    delivery = await eventually(read, lambda body: body["state"] == "dead", timeout=20)
    attempts = await client.get(f"/v1/deliveries/{delivery_id}/attempts", headers=tenant)
    return delivery, attempts.json()["items"]


async def judged_healthy(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint_id: str
) -> None:
    endpoint = (await client.get(f"/v1/endpoints/{endpoint_id}", headers=tenant)).json()
    assert endpoint["consecutive_failures"] == 0, endpoint
    assert endpoint["circuit"] == "closed" and endpoint["enabled"] is True, endpoint


def logged_for(worker: HeraldProcess, delivery_id: str) -> list[dict[str, Any]]:
    return [entry for entry in worker.events() if entry.get("delivery_id") == delivery_id]


TOKEN = "tok-" + secrets.token_hex(8)


@pytest.mark.parametrize(
    "headers",
    [
        {"Content-Type\n": "text/html"},
        {"Host\n": "evil"},
        {"X-A": "abc\n"},
        {"Authorization": f"Bearer {TOKEN}\n"},
    ],
    ids=["name-content-type", "name-host", "value", "credential"],
)
async def test_headers_no_request_can_carry_end_it_at_once_and_say_so(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    engine: AsyncEngine,
    worker: HeraldProcess,
    headers: dict[str, str],
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/unbuilt"))
    await write_endpoint(engine, endpoint["id"], "headers", headers)

    delivery, [attempt] = await finished(client, tenant, endpoint["id"])

    # The same request would fail the same way: dead at once, redriven once the headers are fixed.
    assert delivery["attempt_count"] == 1 and delivery["last_outcome"] == "permanent"
    assert attempt["outcome"] == "permanent" and attempt["status_code"] is None
    assert attempt["error"].startswith("request not built: "), attempt
    assert "the header" in attempt["error"] or "a header name" in attempt["error"], attempt
    assert "shut down" not in attempt["error"]
    assert "request not built" in delivery["dead_reason"]
    assert receiver.on("/unbuilt") == []  # nothing was sent
    await judged_healthy(client, tenant, endpoint["id"])
    # One warning, no traceback, and no header's value anywhere.
    logged = logged_for(worker, delivery["id"])
    refusals = [entry for entry in logged if entry["event"] == "delivery.request_not_built"]
    assert [(e["level"], e["endpoint_id"]) for e in refusals] == [("warning", endpoint["id"])]
    assert not [entry for entry in logged if "exception" in entry], logged
    output = worker.output()
    for value in headers.values():
        assert value.strip() not in output and value.strip() not in json.dumps(attempt)


@pytest.mark.usefixtures("worker")
async def test_a_url_no_request_can_go_to_ends_it_at_once(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    endpoint = await new_endpoint(client, tenant)
    await write_endpoint(engine, endpoint["id"], "url", "http://127.0.0.1:99999/hook")

    delivery, [attempt] = await finished(client, tenant, endpoint["id"])

    assert attempt["outcome"] == "permanent" and attempt["status_code"] is None
    assert attempt["error"].startswith("request not built: invalid URL: "), attempt
    assert "request not built: invalid URL" in delivery["dead_reason"]
    await judged_healthy(client, tenant, endpoint["id"])


async def test_a_request_that_fails_to_build_for_no_known_reason_ends_once_with_its_traceback(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    engine: AsyncEngine,
    worker: HeraldProcess,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/unsigned"))
    # Nine base64 digits decode to no bytes at all: nothing can be signed with this secret.
    damaged = "whsec_" + secrets.token_hex(4) + "A"
    await write_endpoint(engine, endpoint["id"], "secret", damaged)

    delivery, [attempt] = await finished(client, tenant, endpoint["id"])

    assert delivery["attempt_count"] == 1
    assert attempt["outcome"] == "permanent" and attempt["status_code"] is None
    assert attempt["error"] == (
        "request not built: internal error; see the worker logs (delivery.request_not_built, "
        f"delivery_id {delivery['id']}, endpoint_id {endpoint['id']})"
    )
    assert receiver.on("/unsigned") == []
    await judged_healthy(client, tenant, endpoint["id"])
    logged = logged_for(worker, delivery["id"])
    [failure] = [entry for entry in logged if entry["event"] == "delivery.request_not_built"]
    assert failure["level"] == "error" and "Traceback" in failure["exception"]
    # Ended, not handed back to fail again at once (and again, and again).
    assert [entry["event"] for entry in logged if "given_back" in entry["event"]] == []
    assert damaged not in worker.output()


async def test_a_secret_sealed_under_a_key_the_ring_lacks_ends_once_and_names_only_the_key(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    engine: AsyncEngine,
    worker: HeraldProcess,
) -> None:
    """What losing a key of HERALD_SECRET_KEYS costs: the secrets sealed under it, and no more.
    The delivery is dead at once (redriven once the secret is rotated), nothing is sent."""
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/lost-key"))
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    await write_endpoint(engine, endpoint["id"], "secret", secret, ring=new_key("lost-1"))

    delivery, [attempt] = await finished(client, tenant, endpoint["id"])

    assert delivery["attempt_count"] == 1 and attempt["outcome"] == "permanent"
    assert attempt["error"] == (
        "request not built: the signing secret: a stored secret is sealed under the key "
        "'lost-1', which HERALD_SECRET_KEYS does not hold"
    )
    assert receiver.on("/lost-key") == []
    await judged_healthy(client, tenant, endpoint["id"])
    assert secret not in worker.output()
