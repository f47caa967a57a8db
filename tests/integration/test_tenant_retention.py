"""A tenant's own retention (`retention_days`, `payload_retention_days` in `/v1/tenant`): held
within the operator's, written by every accept path onto the event and its deliveries alike,
and what the tenant is shown of its finished deliveries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.payload_retention import KEPT_WITH_RECORDS
from tests.fixtures.api import accept, new_endpoint, new_tenant, portal_bearer
from tests.fixtures.console_forms import sign_in
from tests.fixtures.engine import pump
from tests.fixtures.receiver import Receiver
from tests.fixtures.waiting import wait_state


async def _settings(client: httpx.AsyncClient, tenant: dict[str, str]) -> dict[str, Any]:
    shown: dict[str, Any] = (await client.get("/v1/tenant", headers=tenant)).json()
    return {k: shown[k] for k in ("retention_days", "payload_retention_days")}


async def test_a_tenants_retention_is_held_within_the_operators_and_said_in_words(
    client: httpx.AsyncClient, tenant: dict[str, str], settings: Settings
) -> None:
    most = int(settings.retention_days)
    assert await _settings(client, tenant) == {
        "retention_days": None,
        "payload_retention_days": None,
    }

    too_long = await client.patch("/v1/tenant", json={"retention_days": most + 1}, headers=tenant)
    assert too_long.status_code == 422
    assert too_long.headers["content-type"] == "application/problem+json"
    assert too_long.json()["detail"] == (
        f"retention_days is {most + 1}, longer than this Herald keeps anything: "
        f"{most} days (its operator's HERALD_RETENTION_DAYS)"
    )
    # A request sent again under its key must find what it made: records outlast the window.
    brief = await client.patch("/v1/tenant", json={"retention_days": 1}, headers=tenant)
    assert brief.status_code == 422
    assert brief.json()["detail"] == (
        "retention_days is 1: it must outlast the idempotency window "
        f"({settings.idempotency_key_ttl_hours:g} hours), so that a request sent again finds "
        "what it made"
    )
    set_ = await client.patch("/v1/tenant", json={"retention_days": 3}, headers=tenant)
    assert set_.status_code == 200 and set_.json()["retention_days"] == 3
    # A payload is never kept past its records: in one change or across two.
    for body in ({"payload_retention_days": 5}, {"retention_days": 2, "payload_retention_days": 3}):
        longer = await client.patch("/v1/tenant", json=body, headers=tenant)
        assert longer.status_code == 422, longer.text
        assert (
            "a payload is never kept past the records of its deliveries"
            in (longer.json()["detail"])
        )
    zero = await client.patch("/v1/tenant", json={"payload_retention_days": 0}, headers=tenant)
    assert zero.status_code == 422
    # Nothing refused was half-written.
    assert await _settings(client, tenant) == {"retention_days": 3, "payload_retention_days": None}

    both = {"retention_days": most, "payload_retention_days": 1}
    assert (await client.patch("/v1/tenant", json=both, headers=tenant)).status_code == 200
    assert await _settings(client, tenant) == both
    back = {"retention_days": None, "payload_retention_days": None}
    assert (await client.patch("/v1/tenant", json=back, headers=tenant)).status_code == 200
    assert await _settings(client, tenant) == back


async def test_every_accept_path_writes_the_tenants_payload_days_and_each_is_sent(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    other = await new_tenant(client, "keeps everything")
    change = {"retention_days": 4, "payload_retention_days": 2}
    assert (await client.patch("/v1/tenant", json=change, headers=tenant)).status_code == 200
    mine = await new_endpoint(client, tenant, url=receiver.url("/mine"), event_types=["a.*"])
    theirs = await new_endpoint(client, other, url=receiver.url("/theirs"))

    ids = [await accept(client, tenant, mine["id"]), await accept(client, other, theirs["id"])]
    item = {"endpoint_id": mine["id"], "event_type": "a.b", "payload": {}}
    batch = await client.post("/v1/deliveries/batch", json={"items": [item]}, headers=tenant)
    assert batch.status_code == 200, batch.text
    ids.append(batch.json()["items"][0]["delivery"]["id"])
    fanned = await client.post(
        "/v1/events", json={"event_type": "a.c", "payload": {}}, headers=tenant
    )
    assert fanned.status_code == 202, fanned.text
    ids.append(fanned.json()["deliveries"][0]["id"])
    tested = await client.post(f"/v1/endpoints/{mine['id']}/test-events", json={}, headers=tenant)
    assert tested.status_code == 202, tested.text
    ids.append(tested.json()["id"])

    async with engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT d.id, d.payload_days AS delivery, e.payload_days AS event"
                " FROM deliveries AS d JOIN events AS e ON e.id = d.event_id"
                " WHERE d.id = ANY(:ids)"
            ),
            {"ids": ids},
        )
        written = {row.id: (row.delivery, row.event) for row in rows}
    assert written == {
        ids[0]: (2, 2),
        ids[1]: (KEPT_WITH_RECORDS, KEPT_WITH_RECORDS),
        ids[2]: (2, 2),
        ids[3]: (2, 2),
        ids[4]: (2, 2),
    }
    async with pump(settings, engine) as (running, _):
        running.start()
        for delivery_id in ids:
            await wait_state(engine, delivery_id, "succeeded")
    shown = (await client.get(f"/v1/deliveries/{ids[0]}", headers=tenant)).json()
    assert shown["payload_expires_at"] is not None and shown["payload_expired"] is False


async def test_a_finished_delivery_past_the_tenants_retention_is_no_longer_shown(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    assert (
        await client.patch("/v1/tenant", json={"retention_days": 2}, headers=tenant)
    ).status_code == 200
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/hook"))
    old, recent = [await accept(client, tenant, endpoint["id"]) for _ in range(2)]
    async with pump(settings, engine) as (running, _):
        running.start()
        for delivery_id in (old, recent):
            await wait_state(engine, delivery_id, "succeeded")
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    live = await accept(client, tenant, endpoint["id"], deliver_after=tomorrow)
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE deliveries SET completed_at = now() - make_interval(days => :days)"
                " WHERE id = :id"
            ),
            [{"id": old, "days": 3}, {"id": recent, "days": 1}],
        )
        # Live, however old: never hidden.
        await connection.execute(
            text("UPDATE deliveries SET created_at = now() - interval '9 days' WHERE id = :id"),
            {"id": live},
        )

    for delivery_id, status in ((old, 404), (recent, 200), (live, 200)):
        shown = await client.get(f"/v1/deliveries/{delivery_id}", headers=tenant)
        assert shown.status_code == status, (delivery_id, shown.text)
    listed = (await client.get("/v1/deliveries", headers=tenant)).json()["items"]
    assert {d["id"] for d in listed} == {recent, live}
    event_id = (await client.get(f"/v1/deliveries/{recent}", headers=tenant)).json()["event_id"]
    assert (await client.get(f"/v1/events/{event_id}", headers=tenant)).status_code == 200

    # Back to the operator's retention: shown again (the row was only hidden).
    back = await client.patch("/v1/tenant", json={"retention_days": None}, headers=tenant)
    assert back.status_code == 200
    assert (await client.get(f"/v1/deliveries/{old}", headers=tenant)).status_code == 200


async def test_the_console_and_the_portal_say_a_payload_expired_and_show_none_of_it(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    change = {"payload_retention_days": 1}
    assert (await client.patch("/v1/tenant", json=change, headers=tenant)).status_code == 200
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    endpoint = await new_endpoint(client, tenant, customer_id="acme")
    secret = {"card": "4111 1111 1111 1111"}
    fresh, old = [await accept(client, tenant, endpoint["id"], payload=secret) for _ in range(2)]
    async with engine.begin() as connection:
        await connection.execute(
            text("UPDATE deliveries SET created_at = now() - interval '25 hours' WHERE id = :id"),
            {"id": old},
        )
    bearer = await portal_bearer(client, tenant, "acme")
    portal = {
        d: await client.get(f"/portal/api/deliveries/{d}", headers=bearer) for d in (fresh, old)
    }
    await sign_in(client, tenant["Authorization"].removeprefix("Bearer "))
    console = {d: await client.get(f"/console/deliveries/{d}") for d in (fresh, old)}
    whole = await client.get(f"/console/deliveries/{old}/payload")

    for page in (portal[fresh], console[fresh]):
        assert page.status_code == 200 and "4111 1111 1111 1111" in page.text
        assert 'id="payload-expired"' not in page.text
    for page in (portal[old], console[old], whole):
        assert page.status_code == 200, page.text
        assert 'id="payload-expired"' in page.text and "4111" not in page.text
