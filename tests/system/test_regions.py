"""Two regions sharing one database: each region's processes touch only its own deliveries."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.main import create_app
from tests.fixtures.api import new_endpoint, new_tenant
from tests.fixtures.processes import RECOVERY_ENV, running_worker
from tests.fixtures.receiver import Receiver
from tests.fixtures.recovery import states
from tests.fixtures.stack import ADMIN, Stack, client_for
from tests.fixtures.streams import accept_in_order


async def test_no_region_claims_publishes_or_sends_another_regions_deliveries(
    settings: Settings, stack: Stack, engine: AsyncEngine, receiver: Receiver, tmp_path: Path
) -> None:
    eu_app = create_app(settings.model_copy(update={"region": "eu"}))
    us_app = create_app(settings.model_copy(update={"region": "us"}))
    async with (
        eu_app.router.lifespan_context(eu_app),
        us_app.router.lifespan_context(us_app),
        client_for(eu_app) as eu,
        client_for(us_app) as us,
    ):
        tenant = await new_tenant(eu, "global")
        endpoint = await new_endpoint(eu, tenant, url=receiver.url("/regional"))
        body = {"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {}}
        eu_id = (await eu.post("/v1/deliveries", json=body, headers=tenant)).json()["id"]
        us_id = (await us.post("/v1/deliveries", json=body, headers=tenant)).json()["id"]
        async with engine.connect() as connection:
            rows = await connection.execute(text("SELECT id, region FROM deliveries"))
            owners = {row.id: row.region for row in rows}
        assert owners == {eu_id: "eu", us_id: "us"}

        with running_worker(stack, tmp_path / "eu.log", HERALD_REGION="eu", **RECOVERY_ENV):
            await receiver.wait_for("/regional", 1)
            # Make the us delivery look abandoned: an eu reconcile must still leave it alone.
            async with engine.begin() as connection:
                await connection.execute(
                    text(
                        "UPDATE deliveries SET state = 'enqueued', attempt_count = 1,"
                        " next_attempt_at = now() - interval '1 hour'"
                        " WHERE id = :d"
                    ),
                    {"d": us_id},
                )
            run = (await eu.post("/v1/reconcile", headers=ADMIN)).json()
            for _ in range(100):
                shown = (await eu.get(f"/v1/reconcile/runs/{run['run_id']}", headers=ADMIN)).json()
                if shown["status"] == "succeeded":
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(1)
        assert shown["status"] == "succeeded" and sum(shown["counts"].values()) == 0
        assert [r.headers["webhook-id"] for r in receiver.on("/regional")] == [eu_id]
        assert (await states(engine, [us_id]))[us_id] == "enqueued"

        with running_worker(stack, tmp_path / "us.log", HERALD_REGION="us", **RECOVERY_ENV):
            await us.post("/v1/reconcile", headers=ADMIN)
            await receiver.wait_for("/regional", 2)
    assert {r.headers["webhook-id"] for r in receiver.on("/regional")} == {eu_id, us_id}


async def test_a_stream_handed_on_from_another_region_is_woken_in_its_own(
    settings: Settings, engine: AsyncEngine
) -> None:
    eu_app = create_app(settings.model_copy(update={"region": "eu"}))
    us_app = create_app(settings.model_copy(update={"region": "us"}))
    async with (
        eu_app.router.lifespan_context(eu_app),
        us_app.router.lifespan_context(us_app),
        client_for(eu_app) as eu,
        client_for(us_app) as us,
    ):
        tenant = await new_tenant(eu, "handed-on")
        endpoint = await new_endpoint(eu, tenant, ordering="endpoint")
        head, second = await accept_in_order(us, tenant, endpoint["id"], [None, None])
        async with engine.begin() as connection:
            # The us API published its own wake-ups; only what comes next is looked at.
            await connection.execute(text("DELETE FROM outbox_wakeups"))
        # Cancelled through the eu API: the us stream's next delivery becomes its head.
        cancelled = await eu.post(f"/v1/deliveries/{head['id']}/cancel", headers=tenant)
        assert cancelled.status_code == 200, cancelled.text
        async with engine.connect() as connection:
            rows = (
                await connection.execute(text("SELECT region, endpoint_id FROM outbox_wakeups"))
            ).all()
    # Filed in us, and left there for us's relay: the eu API armed nothing in its own Redis.
    assert [(r.region, r.endpoint_id) for r in rows] == [("us", endpoint["id"])]
    assert (await states(engine, [second["id"]]))[second["id"]] == "pending"
