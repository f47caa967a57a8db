"""Polling endpoints: deliveries a second through poll and acknowledge, 100 a page, beside e2e
push to the instant receiver in the same run.

Both start from the same backlog, accepted with nothing running. Push is timed from the
workers' start until the receiver has seen every delivery; polling from the first poll until
every delivery is acknowledged (succeeded), by pollers that each read a page, then acknowledge
it -- what a receiver that processes each page before the next does. No worker runs while
they poll: a polling endpoint's deliveries are the API's to hand out."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.load import Client, intents_for
from bench.stack import API, progress

PAGE = 100
POLLERS = 8  # the receiver's pollers, side by side


async def measure(client: Client, total: int) -> dict[str, Any]:
    progress(f"polling: e2e push of {total}, then poll + ack of {total} at {PAGE} a page")
    push = await client.end_to_end("instant", total)
    stack = client.stack
    stack.stop_workers()
    await stack.clean_slate()
    endpoint = (await client.post("/v1/endpoints", {"delivery": "poll"}))["id"]
    await client.accept_items(intents_for(endpoint, total))
    acknowledged = 0
    pages = 0

    async def poller() -> None:
        nonlocal acknowledged, pages
        path = f"{API}/v1/endpoints/{endpoint}/poll?limit={PAGE}"
        while acknowledged < total:
            async with client.http.get(path, headers=client.tenant) as response:
                assert response.status == 200, await response.text()
                read = (await response.json())["data"]
            if not read:
                await asyncio.sleep(0.01)  # what is left is in another poller's hands
                continue
            receipts = [item["receipt"] for item in read]
            done = await client.post(f"/v1/endpoints/{endpoint}/poll/ack", {"receipts": receipts})
            acknowledged += len(done["acknowledged"])
            pages += 1

    started = time.perf_counter()
    await asyncio.gather(*(poller() for _ in range(POLLERS)))
    elapsed = time.perf_counter() - started
    succeeded = await stack.sql(
        "SELECT count(*) FROM deliveries WHERE endpoint_id = $1 AND state = 'succeeded'", endpoint
    )
    assert succeeded == total, f"{succeeded} of {total} succeeded"
    per_second = total / elapsed
    return {
        "per_second": per_second,
        "push_per_second": push["per_second"],
        "ratio": per_second / push["per_second"],
        "deliveries": total,
        "page": PAGE,
        "pollers": POLLERS,
        "pages": pages,
    }
