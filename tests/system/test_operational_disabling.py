"""An endpoint disabled by Herald itself -- no success for HERALD_DISABLE_AFTER_HOURS -- is
told to the tenant's operational endpoint, by a real worker whose limit is a third of a
second (its retries come every 0.3 s, so the third failure in a row is past it)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.fixtures.api import new_endpoint
from tests.fixtures.processes import HeraldProcess, running_worker
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.stack import Stack
from tests.fixtures.waiting import eventually


@pytest.fixture(scope="module")
def worker(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeraldProcess]:
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    with running_worker(
        stack, log, HERALD_DISABLE_AFTER_HOURS="0.0001", HERALD_BREAKER_FAILURES="1000"
    ) as process:
        yield process


async def test_herald_disabling_a_failing_endpoint_is_told(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    worker: HeraldProcess,
) -> None:
    watcher = await new_endpoint(
        client, tenant, url=receiver.url("/ops"), event_types=["herald.endpoint.disabled"]
    )
    failing = await new_endpoint(client, tenant, url=receiver.url("/down"))
    receiver.script("/down", *[Reply(status=503)] * 10)
    accepted = await client.post(
        "/v1/deliveries",
        json={"endpoint_id": failing["id"], "event_type": "order.paid", "payload": {}},
        headers=tenant,
    )
    assert accepted.status_code == 202

    told = await eventually(lambda: _received(receiver), lambda found: bool(found))
    assert told == [
        {
            "endpoint_id": failing["id"],
            "customer_id": None,
            "url": failing["url"],
            "reason": "no successful delivery for 0.0001 hours",
        }
    ]
    shown = await client.get(f"/v1/endpoints/{failing['id']}", headers=tenant)
    assert shown.json()["enabled"] is False
    assert watcher["operational"] is True


async def _received(receiver: Receiver) -> list[dict[str, object]]:
    return [
        {k: v for k, v in json.loads(r.body).items() if k != "occurred_at"}
        for r in receiver.on("/ops")
    ]
