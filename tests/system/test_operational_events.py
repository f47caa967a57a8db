"""Operational events made by their real causes -- a receiver failing and recovering, attempts
running out, a 410, a cancel, a stream halting, a person disabling and enabling -- through a
real `herald worker`, and received signed by a real receiver. And the loop rule: an
operational endpoint that fails everything makes no operational event about itself."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import jsonschema
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks.webhooks import Webhook

from tests.fixtures.api import new_endpoint
from tests.fixtures.processes import HeraldProcess, running_worker
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.stack import Stack
from tests.fixtures.waiting import count_rows, eventually


@pytest.fixture(scope="module")
def worker(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeraldProcess]:
    """The module's worker, its breaker out of the way: a receiver failing many times in a row
    is told of, not paused for half a minute."""
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    with running_worker(stack, log, HERALD_BREAKER_FAILURES="1000") as process:
        yield process


def _told(receiver: Receiver, path: str, secret: str) -> list[tuple[str, dict[str, Any]]]:
    """The operational events ``path`` received, each verified by its signature: (type,
    payload), in arrival order, one per event (a retried event counts once)."""
    told: dict[str, tuple[str, dict[str, Any]]] = {}
    for request in receiver.on(path):
        payload = Webhook(secret).verify(request.body, request.headers)
        headers = {name.lower(): value for name, value in request.headers.items()}
        told.setdefault(headers["webhook-id"], (headers["herald-event-type"], payload))
    return list(told.values())


def _about(told: list[tuple[str, dict[str, Any]]], endpoint_id: str) -> list[str]:
    return [kind for kind, payload in told if payload.get("endpoint_id") == endpoint_id]


async def _schemas(client: httpx.AsyncClient, tenant: dict[str, str]) -> dict[str, Any]:
    listed = await client.get("/v1/operational-event-types", headers=tenant)
    return {kind["name"]: kind["schema"] for kind in listed.json()}


async def test_each_operational_event_comes_from_its_real_cause(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    worker: HeraldProcess,
) -> None:
    # Ordered, so that what it was told arrives in the order it happened.
    watcher = await new_endpoint(
        client, tenant, url=receiver.url("/ops"), event_types=["herald.*"], ordering="endpoint"
    )
    assert (await client.patch("/v1/tenant", json={"failing_after": 2}, headers=tenant)).is_success

    # Failing at the second failure in a row, dead when its attempts run out (five 500s), and
    # recovered by the next success.
    flaky = await new_endpoint(client, tenant, url=receiver.url("/flaky"))
    receiver.script("/flaky", *[Reply(status=500)] * 5)
    first = await _deliver(client, tenant, flaky["id"])
    await _wait_for(receiver, watcher, flaky["id"], "herald.delivery.dead")
    await _deliver(client, tenant, flaky["id"])
    await _wait_for(receiver, watcher, flaky["id"], "herald.endpoint.recovered")

    # A 410: the delivery dead and the endpoint disabled by its receiver; enabled again by a
    # person, then disabled by one.
    gone = await new_endpoint(client, tenant, url=receiver.url("/gone"))
    receiver.script("/gone", Reply(status=410))
    await _deliver(client, tenant, gone["id"])
    await _wait_for(receiver, watcher, gone["id"], "herald.endpoint.disabled")
    for enabled in (True, False):
        changed = await client.patch(
            f"/v1/endpoints/{gone['id']}", json={"enabled": enabled}, headers=tenant
        )
        assert changed.status_code == 200
    await _wait_for(receiver, watcher, gone["id"], "herald.endpoint.disabled", times=2)

    # Cancelled before its time.
    later = await _deliver(client, tenant, flaky["id"], after=timedelta(hours=1))
    assert (await client.post(f"/v1/deliveries/{later}/cancel", headers=tenant)).is_success

    # An ordered stream halts behind its dead head.
    ordered = await new_endpoint(client, tenant, url=receiver.url("/ordered"), ordering="endpoint")
    receiver.script("/ordered", Reply(status=400))
    head = await _deliver(client, tenant, ordered["id"])
    await _deliver(client, tenant, ordered["id"])
    await _wait_for(receiver, watcher, ordered["id"], "herald.stream.halted")
    await _wait_for(receiver, watcher, flaky["id"], "herald.delivery.dead", times=2)

    told = _told(receiver, "/ops", watcher["secret"])
    assert _about(told, flaky["id"]) == [
        "herald.endpoint.created",
        "herald.endpoint.failing",
        "herald.delivery.dead",
        "herald.endpoint.recovered",
        "herald.delivery.dead",
    ]
    assert _about(told, gone["id"]) == [
        "herald.endpoint.created",
        "herald.delivery.dead",
        "herald.endpoint.disabled",
        "herald.endpoint.enabled",
        "herald.endpoint.updated",
        "herald.endpoint.disabled",
        "herald.endpoint.updated",
    ]
    assert set(_about(told, ordered["id"])) == {
        "herald.endpoint.created",
        "herald.delivery.dead",
        "herald.stream.halted",
    }
    by_kind = {(kind, p.get("delivery_id") or p["endpoint_id"]): p for kind, p in told}
    exhausted = by_kind[("herald.delivery.dead", first)]
    assert exhausted["state"] == "dead" and exhausted["attempts"] == 5
    assert exhausted["reason"].startswith("max_attempts_exhausted")
    assert exhausted["last_status_code"] == 500
    cancelled = by_kind[("herald.delivery.dead", later)]
    assert cancelled["state"] == "cancelled" and cancelled["attempts"] == 0
    assert by_kind[("herald.endpoint.failing", flaky["id"])]["consecutive_failures"] == 2
    assert by_kind[("herald.endpoint.recovered", flaky["id"])]["failures"] == 5
    reasons = [p["reason"] for kind, p in told if kind == "herald.endpoint.disabled"]
    assert reasons == ["receiver answered 410 Gone", "disabled by user"]
    halted = by_kind[("herald.stream.halted", ordered["id"])]
    assert halted["head_delivery_id"] == head and halted["stream"] == ""
    schemas = await _schemas(client, tenant)
    for kind, payload in told:
        jsonschema.validate(payload, schemas[kind])


async def test_an_operational_endpoints_own_failures_tell_of_nothing(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    engine: AsyncEngine,
    worker: HeraldProcess,
) -> None:
    assert (await client.patch("/v1/tenant", json={"failing_after": 1}, headers=tenant)).is_success
    # Ordered, so that what it was told arrives in the order it happened.
    watcher = await new_endpoint(
        client, tenant, url=receiver.url("/ops"), event_types=["herald.*"], ordering="endpoint"
    )
    # Fails every operational event it is sent, one at a time (ordered, each dead one
    # skipped): the other endpoint's creation, failing, dead -- and answers the third with 410,
    # which disables it. (It is told nothing of itself.)
    broken = await new_endpoint(
        client,
        tenant,
        url=receiver.url("/ops-broken"),
        event_types=["herald.*"],
        ordering="endpoint",
        on_dead="skip",
    )
    receiver.script("/ops-broken", *[Reply(status=500)] * 10, Reply(status=410))
    failing = await new_endpoint(client, tenant, url=receiver.url("/failing"))
    receiver.script("/failing", *[Reply(status=500)] * 5)
    await _deliver(client, tenant, failing["id"])

    await _wait_for(receiver, watcher, broken["id"], "herald.endpoint.disabled")
    # Everything settles: nothing left to deliver, no signal left to tell.
    await eventually(
        lambda: count_rows(engine, "deliveries", "state NOT IN ('succeeded', 'dead')"),
        lambda n: n == 0,
    )
    assert await count_rows(engine, "operational_signals") == 0

    told = _told(receiver, "/ops", watcher["secret"])
    # The broken endpoint really failed operational events, time after time...
    assert len(receiver.on("/ops-broken")) == 11
    assert await count_rows(engine, "deliveries", f"endpoint_id = '{broken['id']}'") >= 3
    # ...and of those failures only its disabling, which needs a person's enabling to happen
    # again, was told: no failing, no dead delivery, nothing fed by its own deliveries.
    assert _about(told, broken["id"]) == ["herald.endpoint.created", "herald.endpoint.disabled"]
    assert _about(told, failing["id"]) == [
        "herald.endpoint.created",
        "herald.endpoint.failing",
        "herald.delivery.dead",
    ]
    # Every operational event there is was caused by the tenant's own endpoints and their
    # deliveries: the creations (the watcher's own went to the broken one if it existed by
    # then, else to no one), failing, dead, and the broken one's disabling -- nothing more.
    async with engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT event_type, payload FROM events WHERE event_type LIKE 'herald.%'")
        )
        made = [(kind, json.loads(bytes(payload))["endpoint_id"]) for kind, payload in rows]
    assert sorted(made) == sorted(
        [
            *([("herald.endpoint.created", watcher["id"])] if len(made) == 6 else []),
            ("herald.endpoint.created", broken["id"]),
            ("herald.endpoint.created", failing["id"]),
            ("herald.endpoint.failing", failing["id"]),
            ("herald.delivery.dead", failing["id"]),
            ("herald.endpoint.disabled", broken["id"]),
        ]
    )


async def _deliver(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint_id: str,
    *,
    after: timedelta | None = None,
) -> str:
    body: dict[str, Any] = {"endpoint_id": endpoint_id, "event_type": "order.paid", "payload": {}}
    if after is not None:
        body["deliver_after"] = (datetime.now(UTC) + after).isoformat()
    response = await client.post("/v1/deliveries", json=body, headers=tenant)
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def _wait_for(
    receiver: Receiver, watcher: dict[str, Any], endpoint_id: str, kind: str, *, times: int = 1
) -> None:
    await eventually(
        lambda: _count(receiver, watcher, endpoint_id, kind),
        lambda n: n >= times,
    )


async def _count(receiver: Receiver, watcher: dict[str, Any], endpoint_id: str, kind: str) -> int:
    told = _told(receiver, "/ops", watcher["secret"])
    return _about(told, endpoint_id).count(kind)
