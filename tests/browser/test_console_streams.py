"""Ordered streams in the console: a waiting delivery names the head it waits
behind, the dead head says it halts its stream, and Skip lets the stream go on."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.async_api import BrowserContext, Dialog, expect
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.console import shoot, sign_in, tenant_with_key
from tests.fixtures.processes import ApiProcess, running_worker
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.stack import Stack
from tests.fixtures.waiting import wait_state


async def test_an_operator_sees_a_halted_stream_and_skips_its_dead_head(
    api: ApiProcess,
    context: BrowserContext,
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    key = await tenant_with_key(api, "ordered-shop")
    tenant = {"Authorization": f"Bearer {key}"}
    receiver.script("/stream", Reply(400, body=b"unknown order"))
    async with httpx.AsyncClient(base_url=api.base_url) as http:
        endpoint = await http.post(
            "/v1/endpoints",
            json={"url": receiver.url("/stream"), "ordering": "key"},
            headers=tenant,
        )
        endpoint_id = endpoint.json()["id"]
        ids = []
        for n in range(2):
            accepted = await http.post(
                "/v1/deliveries",
                json={
                    "endpoint_id": endpoint_id,
                    "event_type": "order.paid",
                    "payload": {"n": n},
                    "ordering_key": "order-9",
                },
                headers=tenant,
            )
            ids.append(accepted.json()["id"])
    head, behind = ids
    with running_worker(stack, tmp_path / "worker.log"):
        await wait_state(engine, head, "dead")
        page = await context.new_page()
        await sign_in(page, api, key, start="/console/endpoints")
        await page.locator(f'tr[data-endpoint="{endpoint_id}"] a.streams').click()
        row = page.locator('#streams tr[data-stream="order-9"]')
        await expect(row).to_contain_text("halts the stream")
        await expect(row).to_contain_text(f"{head} #1")
        await expect(row.locator("td.live")).to_have_text("1")  # the one behind the dead head
        await page.locator("#halted-only").click()
        await expect(page.locator('#streams tr[data-stream="order-9"]')).to_have_count(1)
        await shoot(page, "streams", tmp_path)
        await page.goto(f"{api.base_url}/console/deliveries/{behind}")
        await expect(page.locator("#why")).to_contain_text("halted")
        await expect(page.locator("#stream")).to_contain_text("#2 of key order-9")
        await page.locator("#stream a").click()  # to the head it waits behind
        await expect(page).to_have_url(f"{api.base_url}/console/deliveries/{head}")
        await expect(page.locator("#stream")).to_contain_text("halting it")
        await shoot(page, "halted-stream", tmp_path)

        async def agree(dialog: Dialog) -> None:
            await dialog.accept()

        page.once("dialog", agree)
        await page.locator("#skip").click()
        await expect(page.locator("#why")).to_contain_text("skipped")
        await wait_state(engine, behind, "succeeded")
        await page.goto(f"{api.base_url}/console/endpoints/{endpoint_id}/streams")
        await expect(page.locator("#streams")).to_have_count(0)  # nothing waits any more
    assert [r.headers["Herald-Stream-Sequence"] for r in receiver.on("/stream")] == ["1", "2"]
