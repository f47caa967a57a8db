"""Structured logs from real processes: one JSON event per line, ids as fields, and never a
payload, a signing secret or an API key."""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path

import httpx

from tests.fixtures.processes import running_worker, start_api, wait_healthy
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.stack import ADMIN, Stack


async def test_logs_are_json_events_without_payloads_or_secrets(
    stack: Stack, receiver: Receiver, tmp_path: Path
) -> None:
    marker = "payload-marker-" + secrets.token_hex(8)
    receiver.script("/logged", Reply(500, body=marker.encode()), Reply(200))
    api = start_api(stack, tmp_path, HERALD_LOG_LEVEL="DEBUG")
    try:
        await wait_healthy(api)
        with running_worker(stack, tmp_path / "worker.log", HERALD_LOG_LEVEL="DEBUG") as worker:
            async with httpx.AsyncClient(base_url=api.base_url, timeout=30) as http:
                created = await http.post("/v1/tenants", json={"name": "logs"}, headers=ADMIN)
                api_key = created.json()["api_key"]
                tenant = {"Authorization": f"Bearer {api_key}"}
                endpoint = (
                    await http.post(
                        "/v1/endpoints", json={"url": receiver.url("/logged")}, headers=tenant
                    )
                ).json()
                delivery_id = (
                    await http.post(
                        "/v1/deliveries",
                        json={
                            "endpoint_id": endpoint["id"],
                            "event_type": "log.test",
                            "payload": {"note": marker},
                        },
                        headers=tenant,
                    )
                ).json()["id"]
                await receiver.wait_for("/logged", 2)
                for _ in range(100):
                    if len(worker.events("delivery.attempt")) >= 2:
                        break
                    await asyncio.sleep(0.05)
            worker_lines = worker.output()
            attempts = worker.events("delivery.attempt")
    finally:
        api.stop()
    everything = worker_lines + api.output()

    for forbidden in (marker, endpoint["secret"], endpoint["secret"][6:], api_key):
        assert forbidden not in everything
    for line in worker_lines.splitlines():
        entry = json.loads(line)  # every line is one JSON object
        assert {"event", "level", "timestamp"} <= set(entry)
    assert [a["attempt"] for a in attempts] == [1, 2]
    assert {a["delivery_id"] for a in attempts} == {delivery_id}
    assert [a["outcome"] for a in attempts] == ["retryable", "success"]


async def test_a_line_per_request_only_when_the_access_log_is_on(
    stack: Stack, tmp_path: Path
) -> None:
    logged: dict[str, list[dict[str, object]]] = {}
    for setting in ("false", "true"):
        (tmp_path / setting).mkdir()
        api = start_api(stack, tmp_path / setting, HERALD_ACCESS_LOG=setting)
        try:
            await wait_healthy(api)
            async with httpx.AsyncClient(base_url=api.base_url, timeout=30) as http:
                for _ in range(3):
                    assert (await http.get("/v1/deliveries")).status_code == 401
        finally:
            api.stop()
        lines = [json.loads(line) for line in api.output().splitlines() if line.startswith("{")]
        logged[setting] = [line for line in lines if line.get("logger") == "uvicorn.access"]

    assert logged["false"] == []
    assert len(logged["true"]) >= 3
    assert all('"GET /v1/deliveries HTTP/1.1" 401' in str(e["event"]) for e in logged["true"][-3:])


async def test_portal_tokens_never_reach_a_log(stack: Stack, tmp_path: Path) -> None:
    api = start_api(stack, tmp_path, HERALD_LOG_LEVEL="DEBUG", HERALD_ACCESS_LOG="true")
    try:
        await wait_healthy(api)
        async with httpx.AsyncClient(base_url=api.base_url, timeout=30) as http:
            created = await http.post("/v1/tenants", json={"name": "portal-logs"}, headers=ADMIN)
            tenant = {"Authorization": f"Bearer {created.json()['api_key']}"}
            await http.put("/v1/customers/acme", json={}, headers=tenant)
            minted = await http.post(
                "/v1/portal-sessions", json={"customer_id": "acme"}, headers=tenant
            )
            link = minted.json()["url"].split("#t=", 1)[1]
            opened = await http.post("/portal/api/session", json={"link": link})
            again = await http.post("/portal/api/session", json={"link": link})
    finally:
        api.stop()
    assert opened.status_code == 200 and again.status_code == 401
    logged = api.output()
    assert logged.count("POST /portal/api/session HTTP/1.1") == 2  # the access log was on
    for forbidden in (link, link[4:], opened.json()["session_token"]):
        assert forbidden not in logged
