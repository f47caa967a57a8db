"""The console's overview counts what the fleet gauges count, for the tenant signed in: a
delivery whose lease ran out is shown as such (work that may be lost, not merely late)."""

from __future__ import annotations

import re

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import accept, fast_path_settled, new_endpoint, new_tenant
from tests.fixtures.console_forms import sign_in


def tile(page: str, state: str) -> str:
    found = re.search(rf'data-state="{state}">\s*<span class="n">(\d+)</span>', page)
    assert found is not None, f"no {state} tile"
    return found.group(1)


async def test_the_overview_shows_a_lease_run_out(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    ours = await new_tenant(client, "ours")
    endpoint = await new_endpoint(client, ours)
    first, second = [await accept(client, ours, endpoint["id"]) for _ in range(2)]
    await fast_path_settled(engine)
    # Another tenant's lapsed lease is not ours to see.
    theirs = await new_tenant(client, "theirs")
    elsewhere = await accept(client, theirs, (await new_endpoint(client, theirs))["id"])
    await fast_path_settled(engine)
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE deliveries SET state = 'leased', lease_until = now() + "
                "CASE WHEN id = :fresh THEN interval '1 day' ELSE interval '-1 day' END "
                "WHERE id IN (:fresh, :lapsed, :elsewhere)"
            ),
            {"fresh": first, "lapsed": second, "elsewhere": elsewhere},
        )
    await sign_in(client, ours["Authorization"].removeprefix("Bearer "))
    page = (await client.get("/console")).text
    assert tile(page, "leased") == "2"
    assert re.search(r'id="expired-leases"[^>]*>1 past their lease<', page)
    assert tile(page, "pending") == "0"
