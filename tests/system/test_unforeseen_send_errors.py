"""An error no handler foresaw while sending -- a bug, injected at a named error point in a
real `herald worker` -- is retried, never held against the receiver, and logged with its
traceback once per attempt. (Herald's HTTP client handles every failure a receiver or the
network can cause, so only a bug is left to reach this path.)"""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.fixtures.api import new_endpoint
from tests.fixtures.processes import running_worker
from tests.fixtures.receiver import Receiver
from tests.fixtures.stack import Stack
from tests.system.test_failures_inside_herald import (
    MAX_ATTEMPTS,
    finished,
    judged_healthy,
    logged_for,
)


async def test_an_error_no_handler_foresaw_while_sending_is_retried_not_held_against_receiver(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    stack: Stack,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    # Herald's HTTP client handles every failure it can meet: the error stands for a bug.
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/unforeseen"))
    log_file = tmp_path / "worker.log"
    with running_worker(stack, log_file, HERALD_FAULT="worker.error_while_sending") as worker:
        delivery, attempts = await finished(client, tenant, endpoint["id"])

    assert delivery["attempt_count"] == MAX_ATTEMPTS
    assert "max_attempts_exhausted" in delivery["dead_reason"]
    said = (
        "before sending: internal error; see the worker logs (delivery.send_failed, "
        f"delivery_id {delivery['id']}, endpoint_id {endpoint['id']})"
    )
    assert [(a["outcome"], a["error"]) for a in attempts] == [("retryable", said)] * MAX_ATTEMPTS
    assert receiver.on("/unforeseen") == []
    await judged_healthy(client, tenant, endpoint["id"])
    logged = logged_for(worker, delivery["id"])
    failures = [entry for entry in logged if entry["event"] == "delivery.send_failed"]
    assert len(failures) == MAX_ATTEMPTS
    assert all("InjectedError" in f["exception"] for f in failures)
    assert [entry["event"] for entry in logged if "given_back" in entry["event"]] == []
