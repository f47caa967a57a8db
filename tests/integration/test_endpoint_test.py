"""`POST /v1/endpoints/{id}/test`: a signed test event through the endpoint's whole path, each
step reported, nothing stored -- and bounded per tenant."""

from __future__ import annotations

import base64
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks.webhooks import Webhook

from tests.fixtures.api import new_endpoint
from tests.fixtures.oauth import CLIENT_ID, CLIENT_SECRET, running_authorization
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.waiting import count_rows


def outcomes(report: dict[str, Any]) -> dict[str, str]:
    return {step["step"]: step["outcome"] for step in report["steps"]}


async def test_a_test_event_goes_the_whole_way_signed_and_leaves_nothing_behind(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver, engine: AsyncEngine
) -> None:
    endpoint = await new_endpoint(
        client,
        tenant,
        url=receiver.url("/tested"),
        payload_format="standard",
        signature_schemes=["v1", "v1a"],
        secret_headers={"X-Api-Key": "k-test"},
    )
    answer = await client.post(f"/v1/endpoints/{endpoint['id']}/test", headers=tenant)
    assert answer.status_code == 200, answer.text
    report = answer.json()
    assert report["delivered"] is True and report["status_code"] == 200
    assert outcomes(report) == {
        "destination": "ok",
        "proxy": "skipped",
        "tls": "skipped",
        "signature": "ok",
        "oauth2": "skipped",
        "request": "ok",
    }
    [sent] = receiver.on("/tested")
    body = Webhook(endpoint["secret"]).verify(sent.body, sent.headers)
    assert body["type"] == "herald.test" and body["data"]["endpoint_id"] == endpoint["id"]
    assert sent.headers["X-Api-Key"] == "k-test"
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(endpoint["public_key"][5:]))
    v1a = next(s for s in sent.headers["webhook-signature"].split(" ") if s.startswith("v1a,"))
    signed = f"{sent.headers['webhook-id']}.{sent.headers['webhook-timestamp']}.".encode()
    key.verify(base64.b64decode(v1a[4:]), signed + sent.body)
    assert sent.headers["webhook-id"].startswith("test_")
    for table in ("deliveries", "attempts", "events", "outbox"):
        assert await count_rows(engine, table) == 0, table


async def test_each_failing_step_is_named_and_stops_the_rest(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver, engine: AsyncEngine
) -> None:
    receiver.script("/broken", Reply(500))
    broken = await new_endpoint(client, tenant, url=receiver.url("/broken"))
    failed = (await client.post(f"/v1/endpoints/{broken['id']}/test", headers=tenant)).json()
    assert failed["delivered"] is False and failed["status_code"] == 500
    assert outcomes(failed)["request"] == "failed"
    assert failed["steps"][-1]["detail"].startswith("HTTP 500 in ")

    async with running_authorization() as authorization:
        authorization.fail_with = 503
        guarded = await new_endpoint(
            client,
            tenant,
            url=authorization.url("/hook"),
            oauth2={
                "token_url": authorization.url("/token"),
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
            },
        )
        report = (await client.post(f"/v1/endpoints/{guarded['id']}/test", headers=tenant)).json()
        assert outcomes(report)["oauth2"] == "failed" and "request" not in outcomes(report)
        assert report["steps"][-1]["detail"] == "token endpoint: HTTP 503"
        assert authorization.presented == []  # nothing reached the receiver

    # A row whose URL now fails the guard (written behind the API's back): refused first.
    async with engine.begin() as connection:
        await connection.execute(
            text("UPDATE endpoints SET url = 'http://169.254.169.254/x' WHERE id = :id"),
            {"id": broken["id"]},
        )
    refused = (await client.post(f"/v1/endpoints/{broken['id']}/test", headers=tenant)).json()
    assert [s["step"] for s in refused["steps"]] == ["destination"]
    assert refused["steps"][0]["outcome"] == "failed"
    assert "link-local" in refused["steps"][0]["detail"]


async def test_tests_are_bounded_per_tenant(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/many"))
    answers = []
    for _ in range(22):  # two minutes' worth at most, should the minute turn meanwhile
        answer = await client.post(f"/v1/endpoints/{endpoint['id']}/test", headers=tenant)
        answers.append(answer)
        if answer.status_code == 429:
            break
    refused = answers[-1]
    assert refused.status_code == 429
    assert refused.headers["content-type"] == "application/problem+json"
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert "at most 10 endpoint tests a minute" in refused.json()["detail"]
    assert all(a.status_code == 200 for a in answers[:-1]) and len(answers) >= 11
    assert len(receiver.on("/many")) == len(answers) - 1
