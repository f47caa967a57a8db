"""What one tenant may use of a shared Herald -- endpoints in all, endpoints of one customer,
the deliveries one event makes -- set by the operator per tenant, read by the tenant, and
refused in words at the limit; another tenant is never held to it."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import asyncpg
import httpx
from alembic import command
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.migrate import alembic_config
from app.programs.budget import FILTERS_PER_TENANT
from tests.fixtures.api import new_endpoint, new_tenant, portal_bearer
from tests.fixtures.stack import ADMIN, Stack, plain_dsn, scratch_database
from tests.fixtures.waiting import count_rows


async def _tenant_id(client: httpx.AsyncClient, tenant: dict[str, str]) -> str:
    limits = (await client.get("/v1/limits", headers=tenant)).json()
    return str(limits["tenant_id"])


async def _set(client: httpx.AsyncClient, tenant_id: str, **limits: Any) -> dict[str, Any]:
    answer = await client.patch(f"/v1/tenants/{tenant_id}/limits", json=limits, headers=ADMIN)
    assert answer.status_code == 200, answer.text
    shown: dict[str, Any] = answer.json()
    return shown


async def test_the_operator_sets_a_tenants_limits_and_the_tenant_reads_them(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    tenant_id = await _tenant_id(client, tenant)
    before = (await client.get("/v1/limits", headers=tenant)).json()
    assert before["set_by_operator"] == [] and before["max_fanout"] == 100

    shown = await _set(client, tenant_id, max_endpoints=3, max_fanout=7)
    assert shown["max_endpoints"] == 3 and shown["max_fanout"] == 7
    assert shown["set_by_operator"] == ["max_endpoints", "max_fanout"]
    # Left out stays; null returns to the default.
    shown = await _set(client, tenant_id, max_fanout=None)
    assert shown["max_endpoints"] == 3 and shown["max_fanout"] == 100
    assert (await client.get("/v1/limits", headers=tenant)).json() == shown

    # A tenant sets nothing of its own, nor reads another's.
    assert (
        await client.patch(f"/v1/tenants/{tenant_id}/limits", json={}, headers=tenant)
    ).status_code == 403
    assert (await client.get(f"/v1/tenants/{tenant_id}/limits", headers=tenant)).status_code == 403
    unchanged = await client.patch(f"/v1/tenants/{tenant_id}/limits", json={}, headers=ADMIN)
    assert unchanged.status_code == 200 and unchanged.json() == shown
    refused = await client.patch(
        f"/v1/tenants/{tenant_id}/limits", json={"max_endpoints": 0}, headers=ADMIN
    )
    assert refused.status_code == 422 and "max_endpoints" in refused.json()["detail"]


async def test_endpoints_past_the_tenants_limit_are_refused_in_words_even_all_at_once(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    await _set(client, await _tenant_id(client, tenant), max_endpoints=5)
    body = {"url": "http://127.0.0.1:9/hook"}
    answers = await asyncio.gather(
        *[client.post("/v1/endpoints", json=body, headers=tenant) for _ in range(12)]
    )
    made = [a for a in answers if a.status_code == 201]
    refused = [a for a in answers if a.status_code == 409]
    assert len(made) == 5 and len(refused) == 7
    assert all("as many as it may (max_endpoints" in a.json()["detail"] for a in refused)
    assert await count_rows(engine, "endpoints") == 5

    other = await new_tenant(client, "other")
    await new_endpoint(client, other)  # another tenant is not held to it


async def test_a_customers_endpoints_are_capped_and_its_portal_says_so_in_its_words(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    await _set(client, await _tenant_id(client, tenant), max_endpoints_per_customer=2)
    await client.put("/v1/customers/cus-1", json={}, headers=tenant)
    manager = await portal_bearer(client, tenant, "cus-1", "manage_endpoints")
    for _ in range(2):
        made = await client.post(
            "/portal/api/endpoints", data={"url": "http://127.0.0.1:9/a"}, headers=manager
        )
        assert made.status_code == 201, made.text
    refused = await client.post(
        "/portal/api/endpoints", data={"url": "http://127.0.0.1:9/a"}, headers=manager
    )
    assert refused.status_code == 422  # the form again, saying why
    assert "You have as many endpoints as you may" in refused.text
    assert "max_endpoints" not in refused.text  # the operator's words stay the tenant's
    by_tenant = await client.post(
        "/v1/endpoints",
        json={"url": "http://127.0.0.1:9/b", "customer_id": "cus-1"},
        headers=tenant,
    )
    assert by_tenant.status_code == 409
    assert "customer cus-1 has 2 endpoints" in by_tenant.json()["detail"]
    # Another customer, and the tenant's own endpoints, each have their own two.
    await new_endpoint(client, tenant)
    await client.put("/v1/customers/cus-2", json={}, headers=tenant)
    await new_endpoint(client, tenant, customer_id="cus-2")


async def test_an_event_reaching_more_endpoints_than_the_fanout_limit_is_refused_before_its_filters(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    tenant_id = await _tenant_id(client, tenant)
    for _ in range(4):
        await new_endpoint(client, tenant, event_types=["order.paid"], filter="true")
    await _set(client, tenant_id, max_fanout=3)
    refused = await client.post(
        "/v1/events", json={"event_type": "order.paid", "payload": {}}, headers=tenant
    )
    assert refused.status_code == 422, refused.text
    assert (
        "more than 3 of the tenant's own endpoints are subscribed to order.paid"
        in (refused.json()["detail"])
    )
    assert await count_rows(engine, "deliveries") == 0
    assert await count_rows(engine, "events") == 0

    await _set(client, tenant_id, max_fanout=4)
    accepted = await client.post(
        "/v1/events", json={"event_type": "order.paid", "payload": {}}, headers=tenant
    )
    assert accepted.status_code == 202, accepted.text
    assert len(accepted.json()["deliveries"]) == 4


async def test_a_tenants_distinct_filters_fit_its_share_of_the_compiled_filters(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    tenant_id = await _tenant_id(client, tenant)
    await _set(client, tenant_id, max_endpoints_per_customer=5_000)
    first = await new_endpoint(client, tenant, filter="payload.n == 0")
    # 999 more endpoints, each with a filter of its own, written as the API would have.
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO endpoints SELECT (jsonb_populate_record(e, jsonb_build_object("
                "'id', 'ep_' || lpad(n::text, 26, '0'), 'filter', 'payload.n == ' || n))).*"
                " FROM endpoints e, generate_series(1, :more) n WHERE e.id = :id"
            ),
            {"more": FILTERS_PER_TENANT - 1, "id": first["id"]},
        )
    refused = await client.post(
        "/v1/endpoints",
        json={"url": "http://127.0.0.1:9/x", "filter": "payload.n == -1"},
        headers=tenant,
    )
    assert refused.status_code == 409, refused.text
    assert f"{FILTERS_PER_TENANT:,} different filters" in refused.json()["detail"]
    changed = await client.patch(
        f"/v1/endpoints/{first['id']}", json={"filter": "payload.n == -1"}, headers=tenant
    )
    assert changed.status_code == 409
    # A filter another endpoint already has costs no more room.
    await new_endpoint(client, tenant, filter="payload.n == 7")
    await new_endpoint(client, tenant)  # nor does none


_OVER_THE_DEFAULTS = """
INSERT INTO tenants (id, name) VALUES ('ten_many', 'many'), ('ten_wide', 'wide'),
                                      ('ten_few', 'few');
INSERT INTO customers (tenant_id, id) VALUES ('ten_wide', 'big'), ('ten_few', 'small');
INSERT INTO endpoints (id, tenant_id, url, secret_sealed, enabled, customer_id)
SELECT 'ep_many' || n, 'ten_many', 'http://127.0.0.1:9/', 'x', true, NULL
  FROM generate_series(1, 10050) AS n;
INSERT INTO endpoints (id, tenant_id, url, secret_sealed, enabled, customer_id)
SELECT 'ep_wide' || n, 'ten_wide', 'http://127.0.0.1:9/', 'x', true, 'big'
  FROM generate_series(1, 150) AS n;
INSERT INTO endpoints (id, tenant_id, url, secret_sealed, enabled, customer_id, deleted_at)
SELECT 'ep_few' || n, 'ten_few', 'http://127.0.0.1:9/', 'x', true, 'small',
       CASE WHEN n > 50 THEN now() END
  FROM generate_series(1, 150) AS n;
"""


async def test_migration_0031_keeps_what_each_tenant_already_has(stack: Stack) -> None:
    """A tenant already past a default gets what it has as its own limit -- no event it
    publishes today is refused tomorrow -- and every other tenant keeps the defaults (null)."""
    name = f"herald_limits_{os.getpid()}"
    url = await scratch_database(stack.database_url, name, create=True)
    config = alembic_config(url)
    try:
        await asyncio.to_thread(command.upgrade, config, "0030")
        connection = await asyncpg.connect(plain_dsn(url))
        try:
            await connection.execute(_OVER_THE_DEFAULTS)
            await asyncio.to_thread(command.upgrade, config, "0031")
            rows = await connection.fetch(
                "SELECT id, max_endpoints, max_endpoints_per_customer, max_fanout"
                " FROM tenants ORDER BY id"
            )
        finally:
            await connection.close()
    finally:
        await scratch_database(stack.database_url, name, create=False)
    assert [tuple(row) for row in rows] == [
        ("ten_few", None, None, None),  # 150 endpoints, 100 of them deleted
        ("ten_many", 10050, 10050, 10050),  # its own endpoints count as one customer's
        ("ten_wide", None, 150, 150),
    ]
