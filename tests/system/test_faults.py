"""Crash-point fault injection: kill real processes at each named boundary, restart them without
the fault, reconcile, and prove nothing accepted was lost and nothing was sent twice in vain."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.faults import FAULT_EXIT_CODE
from app.main import create_app
from tests.fixtures.api import new_endpoint, new_tenant, post_deliveries
from tests.fixtures.processes import (
    RECOVERY_ENV,
    crash_worker,
    running_worker,
    start_api,
    wait_crashed,
    wait_healthy,
)
from tests.fixtures.receiver import Receiver
from tests.fixtures.recovery import assert_recovered, reconcile_until_succeeded
from tests.fixtures.stack import Stack, client_for
from tests.fixtures.waiting import count_rows

PATH = "/faults"


@pytest.mark.parametrize(
    ("point", "sends_before_crash"),
    [
        ("worker.after_claim_before_send", False),
        ("worker.after_send_before_record", True),
        ("worker.after_record_before_ack", True),
    ],
)
async def test_worker_crash_points(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
    point: str,
    sends_before_crash: bool,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url(PATH))
    ids = await post_deliveries(client, tenant, endpoint["id"], 5)

    crashing = crash_worker(stack, tmp_path / "crash.log", point)
    await wait_crashed(crashing)
    # The crash really happened where it was meant to.
    assert f"fault injected at {point}" in crashing.output()
    assert bool(receiver.on(PATH)) is sends_before_crash

    with running_worker(stack, tmp_path / "worker.log", **RECOVERY_ENV):
        await reconcile_until_succeeded(client, engine, ids)
    await assert_recovered(engine, receiver, PATH, ids, crashes=1)


async def test_relay_crash_after_enqueue_before_mark(
    client: httpx.AsyncClient,
    settings: Settings,
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    # An API whose fast path cannot reach Redis, so the relay is the only publisher.
    app = create_app(settings.model_copy(update={"redis_url": f"unix://{tmp_path}/no.sock"}))
    async with app.router.lifespan_context(app), client_for(app) as blind:
        tenant = await new_tenant(blind, "relay-crash")
        endpoint = await new_endpoint(blind, tenant, url=receiver.url(PATH))
        ids = await post_deliveries(blind, tenant, endpoint["id"], 5)

    crashing = crash_worker(stack, tmp_path / "crash.log", "relay.after_enqueue_before_mark")
    await wait_crashed(crashing)
    # Published to Redis, never marked: the outbox rows still say unpublished.
    assert await count_rows(engine, "outbox_wakeups") == len(ids)

    with running_worker(stack, tmp_path / "worker.log", **RECOVERY_ENV):
        await reconcile_until_succeeded(client, engine, ids)
    await assert_recovered(engine, receiver, PATH, ids, crashes=1)


async def test_api_crash_after_commit_before_publish(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url(PATH))
    api = start_api(stack, tmp_path, HERALD_FAULT="api.after_commit_before_publish")
    try:
        await wait_healthy(api)
        async with httpx.AsyncClient(base_url=api.base_url, timeout=30) as http:
            with pytest.raises(httpx.TransportError):
                await http.post(
                    "/v1/deliveries",
                    json={"endpoint_id": endpoint["id"], "event_type": "x", "payload": {}},
                    headers=tenant,
                )
        code = await asyncio.to_thread(api.process.wait, 30)
        assert code == FAULT_EXIT_CODE, api.output()
    finally:
        api.stop()
    # The transaction committed before the crash: the outbox row is the recovery record.
    [delivery_id] = await _all_delivery_ids(engine)
    assert await count_rows(engine, "outbox_wakeups") == 1

    with running_worker(stack, tmp_path / "worker.log", **RECOVERY_ENV):
        await reconcile_until_succeeded(client, engine, [delivery_id])
    await assert_recovered(engine, receiver, PATH, [delivery_id], crashes=1)


async def test_api_crash_before_commit_sends_nothing(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url(PATH))
    api = start_api(stack, tmp_path, HERALD_FAULT="api.before_commit")
    try:
        await wait_healthy(api)
        async with httpx.AsyncClient(base_url=api.base_url, timeout=30) as http:
            with pytest.raises(httpx.TransportError):
                await http.post(
                    "/v1/deliveries",
                    json={"endpoint_id": endpoint["id"], "event_type": "x", "payload": {}},
                    headers=tenant,
                )
        assert await asyncio.to_thread(api.process.wait, 30) == FAULT_EXIT_CODE
    finally:
        api.stop()
    [ok] = await post_deliveries(client, tenant, endpoint["id"], 1)  # a control that must arrive

    with running_worker(stack, tmp_path / "worker.log", **RECOVERY_ENV):
        await reconcile_until_succeeded(client, engine, [ok])
    assert await count_rows(engine, "deliveries") == 1
    assert [r.headers["webhook-id"] for r in receiver.on(PATH)] == [ok]


async def _all_delivery_ids(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as connection:
        return list((await connection.execute(text("SELECT id FROM deliveries"))).scalars())
