"""What the console's pages show besides their figures (issue 24): the why's times written as
the page's others, what an endpoint receives."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from playwright.async_api import BrowserContext, expect

from tests.fixtures.console import sign_in, tenant_with_key
from tests.fixtures.processes import ApiProcess
from tests.fixtures.receiver import Receiver

ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


async def accepted(
    api: ApiProcess, key: str, receiver: Receiver, payload: dict[str, Any], **intent: Any
) -> str:
    """A delivery of ``payload`` to a new endpoint, accepted and left for a worker (none runs)."""
    tenant = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=api.base_url, headers=tenant) as http:
        endpoint = await http.post("/v1/endpoints", json={"url": receiver.url("/hook")})
        answer = await http.post(
            "/v1/deliveries",
            json={
                "endpoint_id": endpoint.json()["id"],
                "event_type": "order.paid",
                "payload": payload,
                **intent,
            },
        )
    assert answer.status_code == 202, answer.text
    delivery_id: str = answer.json()["id"]
    return delivery_id


async def test_the_why_of_a_delivery_writes_its_time_as_the_page_writes_times(
    api: ApiProcess, context: BrowserContext, receiver: Receiver
) -> None:
    key = await tenant_with_key(api, "shop")
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    delivery_id = await accepted(api, key, receiver, {"order": 42}, deliver_after=later)
    page = await context.new_page()
    await sign_in(page, api, key, start=f"/console/deliveries/{delivery_id}")

    next_attempt = await page.locator(".facts dt:text-is('Next attempt') + dd").inner_text()
    assert next_attempt.endswith(" UTC")
    why = page.locator("#why")
    await expect(why).to_have_text(f"scheduled: next attempt at {next_attempt}")
    assert not ISO_TIME.search(await why.inner_text())


async def test_the_endpoints_page_shows_what_each_endpoint_receives(
    api: ApiProcess, context: BrowserContext, receiver: Receiver
) -> None:
    key = await tenant_with_key(api, "shop")
    picky = {
        "url": receiver.url("/billing"),
        "description": "Billing <b>ledger</b> sync",
        "event_types": ["invoice.*", "order.paid"],
        "filter": 'payload.amount > 100 && payload.currency == "EUR"',
    }
    async with httpx.AsyncClient(
        base_url=api.base_url, headers={"Authorization": f"Bearer {key}"}
    ) as http:
        made = [
            (await http.post("/v1/endpoints", json=spec)).json()["id"]
            for spec in (
                picky,
                {"url": receiver.url("/all")},
                {"url": receiver.url("/direct"), "event_types": []},
            )
        ]
    page = await context.new_page()
    await sign_in(page, api, key, start="/console/endpoints")

    billing, every, direct = (page.locator(f"tr[data-endpoint='{e}']") for e in made)
    await expect(billing).to_contain_text("Billing <b>ledger</b> sync")  # as text, escaped
    await expect(billing.locator("b")).to_have_count(0)
    await expect(billing.locator(".event-types")).to_have_text("invoice.*, order.paid")
    await expect(billing.locator(".receives")).to_contain_text(f"where {picky['filter']}")
    await expect(every.locator(".event-types")).to_have_text("every event type")
    await expect(every.locator(".receives")).to_contain_text("no filter")
    await expect(direct.locator(".event-types")).to_have_text(
        "no events, only deliveries sent to it by id"
    )
