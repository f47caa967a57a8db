"""`GET/PATCH /v1/tenant`: the settings a tenant sets itself -- the CloudEvents `source` its
events carry, in both modes and in the connection check, and nobody else's."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from cloudevents.core.bindings.http import HTTPMessage, from_http_event
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.fixtures.api import accept, new_endpoint, new_tenant, portal_bearer
from tests.fixtures.engine import pump
from tests.fixtures.receiver import Received, Receiver
from tests.fixtures.waiting import wait_state

SOURCE = "https://billing.acme.example/invoices"


def _source(sent: Received) -> str:
    source: str = from_http_event(
        HTTPMessage(headers=dict(sent.headers), body=sent.body)
    ).get_source()
    return source


async def _deliver(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    settings: Settings,
    engine: AsyncEngine,
    *endpoints: dict[str, Any],
) -> None:
    ids = [await accept(client, tenant, endpoint["id"]) for endpoint in endpoints]
    async with pump(settings, engine) as (running, _):
        running.start()
        for delivery_id in ids:
            await wait_state(engine, delivery_id, "succeeded")


async def test_a_tenants_own_source_is_on_its_cloudevents_and_only_its(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    before = await client.get("/v1/tenant", headers=tenant)
    assert before.status_code == 200 and before.json()["cloudevents_source"] is None
    tenant_id = before.json()["id"]
    set_ = await client.patch("/v1/tenant", json={"cloudevents_source": SOURCE}, headers=tenant)
    assert set_.status_code == 200 and set_.json()["cloudevents_source"] == SOURCE

    other = await new_tenant(client, "other")
    structured = await new_endpoint(
        client, tenant, url=receiver.url("/structured"), payload_format="cloudevents"
    )
    binary = await new_endpoint(
        client, tenant, url=receiver.url("/binary"), payload_format="cloudevents-binary"
    )
    theirs = await new_endpoint(
        client, other, url=receiver.url("/theirs"), payload_format="cloudevents"
    )
    await _deliver(client, tenant, settings, engine, structured, binary)
    await _deliver(client, other, settings, engine, theirs)

    [sent_structured], [sent_binary] = receiver.on("/structured"), receiver.on("/binary")
    assert _source(sent_structured) == _source(sent_binary) == SOURCE
    assert sent_binary.headers["ce-source"] == SOURCE
    [sent_theirs] = receiver.on("/theirs")
    assert _source(sent_theirs).startswith("urn:herald:tenant:")
    assert tenant_id not in _source(sent_theirs)

    checked = await client.post(f"/v1/endpoints/{structured['id']}/test", headers=tenant)
    assert checked.json()["delivered"] is True
    assert _source(receiver.on("/structured")[-1]) == SOURCE

    # null: back to Herald's default.
    cleared = await client.patch("/v1/tenant", json={"cloudevents_source": None}, headers=tenant)
    assert cleared.json()["cloudevents_source"] is None
    await _deliver(client, tenant, settings, engine, structured)
    assert _source(receiver.on("/structured")[-1]) == f"urn:herald:tenant:{tenant_id}"


@pytest.mark.parametrize(
    "given",
    ["", "has space", "https://a.example/\u00e9", "x" * 256, "a\nb", 7, "URN:herald:tenant:ten_1"],
)
async def test_a_source_that_is_no_uri_reference_is_refused_in_words(
    client: httpx.AsyncClient, tenant: dict[str, str], given: object
) -> None:
    answer = await client.patch("/v1/tenant", json={"cloudevents_source": given}, headers=tenant)
    assert answer.status_code == 422, answer.text
    assert "cloudevents_source" in answer.json()["detail"]
    kept = await client.get("/v1/tenant", headers=tenant)
    assert kept.json()["cloudevents_source"] is None


async def test_the_tenants_settings_are_the_tenants_alone(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    bearer = await portal_bearer(client, tenant, "acme", "manage_endpoints", "replay")
    for method, body in (("GET", None), ("PATCH", {"cloudevents_source": "/x"})):
        answer = await client.request(method, "/v1/tenant", json=body, headers=bearer)
        assert answer.status_code == 403, answer.text
    refused = await client.patch("/v1/tenant", json={"name": "renamed"}, headers=tenant)
    assert refused.status_code == 422  # the operator names tenants
