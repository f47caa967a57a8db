"""The portal's pages say, in a customer's words, what was sent, where a delivery stands and
when it will be tried next, and how each endpoint is doing (through a browser: tests/browser)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from html import unescape

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.delivery.service.payload_views import PREVIEW_BYTES
from tests.fixtures.api import accept, new_endpoint, portal_bearer
from tests.fixtures.database import sql


async def _page(client: httpx.AsyncClient, bearer: dict[str, str], delivery_id: str) -> str:
    page = await client.get(f"/portal/api/deliveries/{delivery_id}", headers=bearer)
    assert page.status_code == 200, page.text
    return unescape(page.text)


async def test_a_waiting_delivery_shows_its_payload_and_its_next_attempt(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    endpoint = await new_endpoint(client, tenant, customer_id="acme")
    later = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    delivery_id = await accept(
        client,
        tenant,
        endpoint["id"],
        payload={"invoice_id": "in_9", "amount": 4200},
        deliver_after=later.isoformat(),
    )
    page = await _page(client, await portal_bearer(client, tenant, "acme"), delivery_id)

    assert ">Waiting to be sent<" in page and ">pending<" not in page
    assert f'Next attempt</dt><dd id="next-attempt">{later:%Y-%m-%d %H:%M:%S} UTC' in page
    assert '"invoice_id": "in_9"' in page and '"amount": 4200' in page  # pretty-printed


async def test_a_paused_or_disabled_endpoint_puts_off_the_next_attempt_and_says_so(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    endpoint = await new_endpoint(client, tenant, customer_id="acme")
    delivery_id = await accept(client, tenant, endpoint["id"])
    bearer = await portal_bearer(client, tenant, "acme")
    paused = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    await sql(
        engine,
        "UPDATE endpoints SET paused_until = :at, pause_reason = 'Retry-After' WHERE id = :e",
        at=paused,
        e=endpoint["id"],
    )
    page = await _page(client, bearer, delivery_id)
    assert f"{paused:%Y-%m-%d %H:%M:%S} UTC, when the endpoint's pause ends" in page

    off = await client.patch(
        f"/v1/endpoints/{endpoint['id']}", json={"enabled": False}, headers=tenant
    )
    assert off.status_code == 200, off.text
    page = await _page(client, bearer, delivery_id)
    assert "when the endpoint is enabled again: it is disabled" in page


async def test_a_large_payload_shows_its_start_and_says_so(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    endpoint = await new_endpoint(client, tenant, customer_id="acme")
    big = {"rows": ["x" * 100] * (2 * PREVIEW_BYTES // 100)}
    delivery_id = await accept(client, tenant, endpoint["id"], payload=big)
    page = await _page(client, await portal_bearer(client, tenant, "acme"), delivery_id)

    assert "characters, as sent" in page
    assert page.count("x" * 100) < len(big["rows"])  # its start, not all of it


async def test_a_delivery_behind_its_stream_says_what_it_waits_for(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    endpoint = await new_endpoint(client, tenant, customer_id="acme", ordering="endpoint")
    await accept(client, tenant, endpoint["id"])
    behind = await accept(client, tenant, endpoint["id"])
    page = await _page(client, await portal_bearer(client, tenant, "acme"), behind)

    assert "after the deliveries before it in order" in page


async def test_the_endpoint_list_and_page_say_how_each_endpoint_is_doing(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    failing = await new_endpoint(client, tenant, customer_id="acme")
    quiet = await new_endpoint(client, tenant, customer_id="acme")
    await sql(
        engine,
        "UPDATE endpoints SET consecutive_failures = 4, failing_since = now() WHERE id = :e",
        e=failing["id"],
    )
    bearer = await portal_bearer(client, tenant, "acme")
    listed = unescape((await client.get("/portal/api/endpoints", headers=bearer)).text)
    cards = {
        endpoint_id: listed.split(f'data-endpoint-id="{endpoint_id}"')[1].split("</li>")[0]
        for endpoint_id in (failing["id"], quiet["id"])
    }
    assert '"badge bad">Failing<' in cards[failing["id"]]
    assert "the last 4 attempts failed since" in cards[failing["id"]]
    assert '"badge off">No deliveries yet<' in cards[quiet["id"]]

    page = (await client.get(f"/portal/api/endpoints/{failing['id']}", headers=bearer)).text
    assert "Failing</span> the last 4 attempts failed since" in unescape(page)


async def test_the_endpoint_form_takes_a_payload_format_and_signatures(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    bearer = await portal_bearer(client, tenant, "acme", "manage_endpoints")
    form = {
        "url": "http://127.0.0.1:9/hook",
        "subscribe": "all",
        "payload_format": "cloudevents",
        "signatures_shown": "1",
    }
    unsigned = await client.post("/portal/api/endpoints", data=form, headers=bearer)
    assert unsigned.status_code == 422
    assert 'id="signature-schemes-error"' in unsigned.text
    assert 'value="v1" checked' not in unsigned.text  # as the customer left it: none ticked

    made = await client.post(
        "/portal/api/endpoints", data={**form, "signature_schemes": "v1a"}, headers=bearer
    )
    assert made.status_code == 201, made.text
    [endpoint] = (await client.get("/v1/endpoints", headers=tenant)).json()["items"]
    assert (endpoint["payload_format"], endpoint["signature_schemes"]) == ("cloudevents", ["v1a"])


async def test_a_failed_delivery_says_why_in_words(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    endpoint = await new_endpoint(client, tenant, customer_id="acme")
    delivery_id = await accept(client, tenant, endpoint["id"])
    await sql(
        engine,
        "UPDATE deliveries SET state = 'dead', completed_at = now(),"
        " dead_reason = 'permanent_failure: HTTP 400' WHERE id = :d",
        d=delivery_id,
    )
    page = await _page(client, await portal_bearer(client, tenant, "acme"), delivery_id)
    assert ">Failed<" in page
    assert (
        "Your receiver refused it, and the same request would be refused again (HTTP 400)" in page
    )
    assert "permanent_failure" not in page
