"""What a tenant's payload retention costs the delivery path: end to end to the instant
receiver once the bench tenant keeps its payloads a day, against the raw aiohttp loop of the
same run, beside the e2e figure without it.

Days are split by payload class from the day after tomorrow on (today's stays as it was made,
and takes the run's rows), so what this measures is what every claim and record pays for the
split days ahead: their plans lock every class of every day, past the backend's fast-path
locks. The setting is undone after, the days made whole again."""

from __future__ import annotations

from typing import Any

from app.core.config import Settings
from app.core.db import create_engine
from app.operations.service import partitions
from bench import baselines
from bench.load import Client
from bench.stack import API, Stack, progress

DEFAULTS = Settings.model_fields


async def measure(client: Client, total: int, in_flight: int) -> dict[str, Any]:
    await _keep_payloads(client, 1)
    tables = await _remake(client.stack)
    progress(f"e2e with payloads kept a day ({tables} days split): {total} deliveries, then raw")
    try:
        herald = await client.end_to_end("instant", total)
        raw = await baselines.raw_loop("instant", total, in_flight)
    finally:
        await _keep_payloads(client, None)
        await _remake(client.stack)
    return {
        **herald,
        "raw_per_second": raw,
        "deliveries": total,
        "ratio": herald["per_second"] / raw,
        "days_split": tables,
    }


async def _keep_payloads(client: Client, days: int | None) -> None:
    body = {"payload_retention_days": days}
    async with client.http.patch(f"{API}/v1/tenant", json=body, headers=client.tenant) as r:
        assert r.status == 200, await r.text()


async def _remake(stack: Stack) -> int:
    """What a reconcile run does first after a change of settings: the days ahead made again."""
    engine = create_engine(stack.database_url, pool_size=2)  # the retirement lock holds one
    try:
        return await partitions.remake_for_classes(
            engine,
            DEFAULTS["partitions_ahead_days"].default,
            DEFAULTS["retention_days"].default,
        )
    finally:
        await engine.dispose()
