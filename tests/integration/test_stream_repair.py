"""Reconcile mends an ordered stream a fault left without a live, scheduled head -- each fault
made here by hand in SQL, since no code path of Herald's leaves one -- and leaves healthy and
halted streams alone."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.fixtures.api import fast_path_settled, new_endpoint, reconcile_now
from tests.fixtures.database import sql
from tests.fixtures.engine import armed_destinations


async def ordered_stream(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine, **fields: Any
) -> tuple[str, list[str]]:
    """An endpoint ordering by key, and three deliveries of key "k" in order (published)."""
    endpoint = await new_endpoint(client, tenant, ordering="key", **fields)
    ids = []
    for n in range(3):
        body = {"endpoint_id": endpoint["id"], "event_type": "a", "payload": {"n": n}}
        response = await client.post(
            "/v1/deliveries", json={**body, "ordering_key": "k"}, headers=tenant
        )
        assert response.status_code == 202, response.text
        ids.append(response.json()["id"])
    await fast_path_settled(engine)
    return endpoint["id"], ids


async def stream_row(engine: AsyncEngine, endpoint_id: str) -> dict[str, Any]:
    async with engine.connect() as connection:
        row = (
            await connection.execute(
                text("SELECT next_seq, head_id, halted_at FROM streams WHERE endpoint_id = :e"),
                {"e": endpoint_id},
            )
        ).one()
    return dict(row._mapping)


async def schedule(engine: AsyncEngine, ids: list[str]) -> list[bool]:
    """Whether each delivery is scheduled (has a next attempt time)."""
    async with engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT id, next_attempt_at IS NOT NULL AS due FROM deliveries WHERE id = ANY(:i)"
            ),
            {"i": ids},
        )
        due = {row.id: row.due for row in rows}
    return [due[i] for i in ids]


async def status(client: httpx.AsyncClient, tenant: dict[str, str], delivery_id: str) -> Any:
    return (await client.get(f"/v1/deliveries/{delivery_id}", headers=tenant)).json()


async def test_a_head_ended_without_a_hand_on_is_handed_on_by_reconcile(
    client: httpx.AsyncClient, tenant: dict[str, str], settings: Settings, engine: AsyncEngine
) -> None:
    endpoint_id, ids = await ordered_stream(client, tenant, engine)
    # The fault: the head finished, and nothing handed its stream on.
    await sql(
        engine,
        "UPDATE deliveries SET state = 'succeeded', completed_at = now() WHERE id = :d",
        d=ids[0],
    )
    stuck = await status(client, tenant, ids[1])
    assert stuck["waiting_reason"] == "stuck", stuck
    assert "not handed on" in stuck["waiting_detail"]

    run = await reconcile_now(client, settings, engine)

    assert run["counts"]["streams_checked"] == 1 and run["counts"]["streams_mended"] == 1
    assert (await stream_row(engine, endpoint_id))["head_id"] == ids[1]
    assert await schedule(engine, ids) == [True, True, False]
    assert (await status(client, tenant, ids[2]))["waiting_behind"] == ids[1]
    assert endpoint_id in await armed_destinations(settings)
    # Mended once: the next run finds nothing to do.
    again = await reconcile_now(client, settings, engine)
    assert again["counts"]["streams_checked"] == 1 and again["counts"]["streams_mended"] == 0


async def test_a_stream_without_a_head_or_a_row_gets_its_first_live_delivery_as_head(
    client: httpx.AsyncClient, tenant: dict[str, str], settings: Settings, engine: AsyncEngine
) -> None:
    endpoint_id, ids = await ordered_stream(client, tenant, engine)
    await sql(
        engine,
        "UPDATE deliveries SET state = 'cancelled', completed_at = now() WHERE id = :d",
        d=ids[0],
    )
    await sql(engine, "DELETE FROM streams WHERE endpoint_id = :e", e=endpoint_id)
    stuck = await status(client, tenant, ids[1])
    assert stuck["waiting_reason"] == "stuck" and "has none" in stuck["waiting_detail"]

    run = await reconcile_now(client, settings, engine)

    assert run["counts"]["streams_mended"] == 1
    row = await stream_row(engine, endpoint_id)
    # The row is back, numbering on after the highest number handed out: never one twice.
    assert row["head_id"] == ids[1] and row["next_seq"] == 4
    assert await schedule(engine, ids[1:]) == [True, False]
    follow = await client.post(
        "/v1/deliveries",
        json={"endpoint_id": endpoint_id, "event_type": "a", "payload": {}, "ordering_key": "k"},
        headers=tenant,
    )
    assert follow.json()["stream_seq"] == 4


async def test_a_live_head_without_a_schedule_is_scheduled(
    client: httpx.AsyncClient, tenant: dict[str, str], settings: Settings, engine: AsyncEngine
) -> None:
    endpoint_id, ids = await ordered_stream(client, tenant, engine)
    await sql(engine, "UPDATE deliveries SET next_attempt_at = NULL WHERE id = :d", d=ids[0])
    stuck = await status(client, tenant, ids[0])
    assert stuck["waiting_reason"] == "stuck" and "no schedule" in stuck["waiting_detail"]

    run = await reconcile_now(client, settings, engine)

    assert run["counts"]["streams_mended"] == 1
    assert (await stream_row(engine, endpoint_id))["head_id"] == ids[0]
    assert await schedule(engine, ids) == [True, False, False]


async def test_healthy_and_halted_streams_are_left_alone(
    client: httpx.AsyncClient, tenant: dict[str, str], settings: Settings, engine: AsyncEngine
) -> None:
    healthy, _ = await ordered_stream(client, tenant, engine)
    halted, ids = await ordered_stream(client, tenant, engine)
    # A dead head that halted its stream, as the recorder leaves one.
    await sql(
        engine,
        "UPDATE deliveries SET state = 'dead', completed_at = now(), dead_reason = 'gone'"
        " WHERE id = :d",
        d=ids[0],
    )
    await sql(engine, "UPDATE streams SET halted_at = now() WHERE endpoint_id = :e", e=halted)
    before = {e: await stream_row(engine, e) for e in (healthy, halted)}

    run = await reconcile_now(client, settings, engine)

    assert run["counts"]["streams_checked"] == 2 and run["counts"]["streams_mended"] == 0
    assert {e: await stream_row(engine, e) for e in (healthy, halted)} == before
    assert (await status(client, tenant, ids[1]))["waiting_reason"] == "halted"


async def test_the_streams_page_lists_streams_with_a_head_by_key_and_pages(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    endpoint = await new_endpoint(client, tenant, ordering="key")
    for key in ("b", "a", "c", "a", None):
        body: dict[str, Any] = {"endpoint_id": endpoint["id"], "event_type": "a", "payload": {}}
        if key is not None:
            body["ordering_key"] = key
        assert (await client.post("/v1/deliveries", json=body, headers=tenant)).status_code == 202
    # Stream "c" halts on its dead head, as the recorder leaves one.
    await sql(
        engine,
        "UPDATE deliveries SET state = 'dead', completed_at = now(), dead_reason = 'gone'"
        " WHERE stream = 'c'",
    )
    await sql(engine, "UPDATE streams SET halted_at = now() WHERE stream = 'c'")
    path = f"/v1/endpoints/{endpoint['id']}/streams"

    first = (await client.get(path, params={"limit": 2}, headers=tenant)).json()
    assert [s["ordering_key"] for s in first["items"]] == [None, "a"]  # the keyless one first
    assert first["items"][1]["live"] == 2 and first["items"][1]["last_seq"] == 2
    assert first["items"][1]["head_seq"] == 1 and first["items"][1]["head_state"] == "pending"
    rest = await client.get(path, params={"cursor": first["next_cursor"]}, headers=tenant)
    assert [s["ordering_key"] for s in rest.json()["items"]] == ["b", "c"]
    assert rest.json()["next_cursor"] is None
    halted = (await client.get(path, params={"halted": "true"}, headers=tenant)).json()
    [stream] = halted["items"]
    assert stream["ordering_key"] == "c" and stream["halted_at"] is not None
    assert stream["head_state"] == "dead" and stream["live"] == 0

    foreign = await client.get(path, params={"cursor": "not-one-of-ours"}, headers=tenant)
    assert foreign.status_code == 422
    assert "next_cursor" in foreign.json()["detail"]
