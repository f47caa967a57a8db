"""Secret headers: sent on every attempt like the plain ones and under the same rules, counted
with them, but never shown -- an endpoint's reads name them only."""

from __future__ import annotations

import secrets
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.fixtures.api import new_endpoint, post_deliveries
from tests.fixtures.engine import pump
from tests.fixtures.receiver import Receiver
from tests.fixtures.waiting import wait_state


async def test_secret_headers_are_sent_on_every_attempt_and_shown_by_name_only(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    credential = "Bearer " + secrets.token_urlsafe(24)
    endpoint = await new_endpoint(
        client,
        tenant,
        url=receiver.url("/secret-headers"),
        headers={"X-Team": "billing"},
        secret_headers={"Authorization": credential, "X-Api-Key": "k-" + secrets.token_hex(8)},
    )
    assert endpoint["secret_header_names"] == ["Authorization", "X-Api-Key"]
    shown = await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)
    listed = await client.get("/v1/endpoints", headers=tenant)
    for answer in (shown, listed):
        assert credential not in answer.text and 'secret_headers"' not in answer.text
    [first] = await post_deliveries(client, tenant, endpoint["id"], 1)
    async with pump(settings, engine) as (running, _):
        running.start()
        await wait_state(engine, first, "succeeded")
        cleared = await client.patch(
            f"/v1/endpoints/{endpoint['id']}", json={"secret_headers": None}, headers=tenant
        )
        assert cleared.status_code == 200 and cleared.json()["secret_header_names"] == []
        assert cleared.json()["headers"] == {"X-Team": "billing"}  # the plain ones stay
        [second] = await post_deliveries(client, tenant, endpoint["id"], 1)
        await wait_state(engine, second, "succeeded")

    with_secret, without = receiver.on("/secret-headers")
    assert with_secret.headers["Authorization"] == credential
    assert with_secret.headers["X-Team"] == without.headers["X-Team"] == "billing"
    assert "Authorization" not in without.headers and "X-Api-Key" not in without.headers


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        (
            {"headers": {"X-Key": "a"}, "secret_headers": {"x-key": "never-echoed"}},
            "the header x-key is both a header and a secret header",
        ),
        ({"secret_headers": {"Webhook-Id": "never-echoed"}}, "the header Webhook-Id is set by"),
        (
            {
                "headers": {f"X-{n}": "v" for n in range(15)},
                "secret_headers": {f"X-S{n}": "never-echoed" for n in range(6)},
            },
            "at most 20 headers per endpoint, secret ones included",
        ),
    ],
)
async def test_secret_headers_are_held_to_the_header_rules_with_the_plain_ones(
    client: httpx.AsyncClient, tenant: dict[str, str], fields: dict[str, Any], says: str
) -> None:
    response = await client.post(
        "/v1/endpoints", json={"url": "http://127.0.0.1:9/x", **fields}, headers=tenant
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert says in response.json()["detail"] and "never-echoed" not in response.text


async def test_a_patch_of_one_kind_of_header_is_checked_against_the_other_kept(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    endpoint = await new_endpoint(client, tenant, secret_headers={"Authorization": "Bearer a"})
    clash = await client.patch(
        f"/v1/endpoints/{endpoint['id']}",
        json={"headers": {"AUTHORIZATION": "plain"}},
        headers=tenant,
    )
    assert clash.status_code == 422
    assert "both a header and a secret header" in clash.json()["detail"]
    kept = (await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)).json()
    assert (kept["headers"], kept["secret_header_names"]) == ({}, ["Authorization"])
