"""What the console's pages show besides their figures: the why's times written as
the page's others, what an endpoint receives, a delivery's payload (escaped, pretty, bounded,
the tenant's only), and an icon on every page."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import BrowserContext, Response, expect

from app.delivery.service.payload_views import PREVIEW_BYTES
from tests.fixtures.console import shoot, sign_in, tenant_with_key
from tests.fixtures.portal import assert_accessible
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
        assert (await http.put("/v1/customers/acme", json={})).is_success
        made = [
            (await http.post("/v1/endpoints", json=spec)).json()["id"]
            for spec in (
                picky,
                {"url": receiver.url("/all")},
                {"url": receiver.url("/direct"), "event_types": []},
                {"url": receiver.url("/acme"), "customer_id": "acme"},
                {"url": receiver.url("/ops"), "event_types": ["herald.endpoint.*"]},
            )
        ]
    page = await context.new_page()
    await sign_in(page, api, key, start="/console/endpoints")

    billing, every, direct, of_acme, ops = (page.locator(f"tr[data-endpoint='{e}']") for e in made)
    await expect(of_acme.locator(".customer")).to_have_text("of customer acme")
    await expect(billing.locator(".customer")).to_have_count(0)
    await expect(ops.locator(".receives")).to_contain_text(
        "Herald's own events (operational): herald.endpoint.*"
    )
    await expect(billing.locator(".operational")).to_have_count(0)
    await expect(billing).to_contain_text("Billing <b>ledger</b> sync")  # as text, escaped
    await expect(billing.locator("b")).to_have_count(0)
    await expect(billing.locator(".event-types")).to_have_text("invoice.*, order.paid")
    await expect(billing.locator(".receives")).to_contain_text(f"where {picky['filter']}")
    await expect(every.locator(".event-types")).to_have_text("every event type")
    await expect(every.locator(".receives")).to_contain_text("no filter")
    await expect(direct.locator(".event-types")).to_have_text(
        "no events, only deliveries sent to it by id"
    )


async def test_the_delivery_page_shows_the_payload_escaped_and_pretty_to_its_tenant_only(
    api: ApiProcess, context: BrowserContext, receiver: Receiver
) -> None:
    key = await tenant_with_key(api, "shop")
    payload = {
        "order": {"id": "o_42", "lines": [{"sku": "tea", "qty": 2}], "total": 19.9},
        "note": "</code></pre><img src=x id=injected onerror=alert(1)> café",
    }
    delivery_id = await accepted(api, key, receiver, payload)
    page = await context.new_page()
    await sign_in(page, api, key, start=f"/console/deliveries/{delivery_id}")

    shown = await page.locator("#payload").inner_text()
    assert shown == json.dumps(payload, indent=2, ensure_ascii=False)
    await expect(page.locator("#injected")).to_have_count(0)
    await expect(page.locator("h2", has_text="Payload")).to_contain_text("pretty-printed")
    await expect(page.locator("#whole-payload")).to_have_count(0)  # all of it is here

    # Another tenant's session sees neither the page nor the payload's page.
    other = await context.browser.new_context()  # type: ignore[union-attr]
    theirs = await other.new_page()
    await sign_in(theirs, api, await tenant_with_key(api, "other"))
    for path in ("", "/payload"):
        refused = await theirs.goto(f"{api.base_url}/console/deliveries/{delivery_id}{path}")
        assert refused is not None and refused.status == 404
        assert "o_42" not in await theirs.content()
    await other.close()


async def test_a_large_payload_shows_its_start_and_the_whole_of_it_when_asked(
    api: ApiProcess, context: BrowserContext, receiver: Receiver
) -> None:
    key = await tenant_with_key(api, "shop")
    payload = {"lines": [{"n": n, "sku": f"sku-{n:06d}", "qty": n % 7} for n in range(6700)]}
    sent = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    assert len(sent) > 240_000  # near the default 256 KiB limit
    delivery_id = await accepted(api, key, receiver, payload)
    page = await context.new_page()
    await sign_in(page, api, key, start=f"/console/deliveries/{delivery_id}")

    start = await page.locator("#payload").inner_text()
    assert 0 < len(start.encode()) <= PREVIEW_BYTES and sent.startswith(start)
    await expect(page.locator("h2", has_text="Payload")).to_contain_text(
        "its first 16.0 KiB, as sent"
    )
    # The page is the size of its preview, not of the payload.
    assert len((await page.content()).encode()) < 3 * PREVIEW_BYTES

    await page.locator("#whole-payload").click()
    await expect(page).to_have_url(f"{api.base_url}/console/deliveries/{delivery_id}/payload")
    assert json.loads(await page.locator("#payload").inner_text()) == payload


async def test_every_console_page_has_an_icon_and_the_site_answers_for_one(
    api: ApiProcess, context: BrowserContext
) -> None:
    page = await context.new_page()
    failed: list[str] = []

    def note(response: Response) -> None:
        if response.status >= 400:
            failed.append(f"{response.status} {response.url}")

    page.on("response", note)
    await page.goto(api.base_url + "/console/sign-in")
    icon = await page.locator("link[rel=icon]").get_attribute("href")
    assert icon is not None
    for path in (icon, "/favicon.ico"):  # the page's, and where a browser looks by itself
        answer = await page.request.get(api.base_url + path)
        assert answer.status == 200, path
        assert answer.headers["content-type"].startswith("image/")
        assert (await answer.body())[:4] == b"\x00\x00\x01\x00"  # an ICO file
    assert failed == []


async def test_the_audit_trail_shows_who_changed_what(
    api: ApiProcess, context: BrowserContext, receiver: Receiver, tmp_path: Path
) -> None:
    key = await tenant_with_key(api, "audited")
    async with httpx.AsyncClient(
        base_url=api.base_url, headers={"Authorization": f"Bearer {key}"}
    ) as http:
        made = (await http.post("/v1/endpoints", json={"url": receiver.url("/a")})).json()
        await http.patch(f"/v1/endpoints/{made['id']}", json={"description": "<i>Orders</i>"})
        await http.put("/v1/customers/acme", json={"name": "Acme"})
    page = await context.new_page()
    await sign_in(page, api, key, start="/console/audit")

    rows = page.locator("#audit tbody tr")
    await expect(rows).to_have_count(4)  # the first key, the endpoint twice, the customer
    newest = rows.nth(0)
    await expect(newest.locator(".action")).to_have_text("customer.created")
    changed = rows.nth(1)
    await expect(changed.locator(".action")).to_have_text("endpoint.updated")
    await expect(changed.locator(".actor")).to_contain_text("api key key_")
    await expect(changed.locator(".changes")).to_contain_text('description: null → "<i>Orders</i>"')
    await expect(changed.locator(".changes i")).to_have_count(0)  # as text, escaped
    await assert_accessible(page)
    await shoot(page, "audit", tmp_path)

    await changed.locator(".subject a").click()
    await expect(page).to_have_url(re.compile(r"/console/audit\?subject=ep_"))
    await expect(page.locator("#audit tbody tr")).to_have_count(2)

    # A key made on the keys page is shown once, then listed by its prefix alone.
    await page.goto(f"{api.base_url}/console/keys")
    await page.locator("#new-key input[name=label]").fill("deploys")
    await page.locator("#new-key button").click()
    made = await page.locator("#new-key-value").inner_text()
    assert made.startswith("hrk_")
    await assert_accessible(page)
    await page.goto(f"{api.base_url}/console/keys")
    await expect(page.locator("#keys tbody tr")).to_have_count(2)
    assert made not in await page.content()
    await assert_accessible(page)


async def test_the_catalogue_is_kept_from_the_console(
    api: ApiProcess, context: BrowserContext
) -> None:
    key = await tenant_with_key(api, "catalogued")
    page = await context.new_page()
    await sign_in(page, api, key, start="/console/event-types")
    await page.locator("summary", has_text="Add an event type").click()
    form = page.locator("#new-event-type")
    await form.locator("input[name=name]").fill("order.paid")
    await form.locator("textarea[name=schema]").fill('{"type": "object"')  # not JSON yet
    await form.locator("button").click()
    await expect(page.locator("#event-type-error")).to_contain_text("schema: not JSON")
    await assert_accessible(page)
    await form.locator("textarea[name=schema]").fill('{"type": "object"}')
    await form.locator("button").click()
    await expect(page.locator("tr[data-event-type='order.paid']")).to_contain_text("version 1")
    await assert_accessible(page)


async def test_customers_and_the_portals_settings_pages_are_accessible(
    api: ApiProcess, context: BrowserContext
) -> None:
    key = await tenant_with_key(api, "customers")
    async with httpx.AsyncClient(
        base_url=api.base_url, headers={"Authorization": f"Bearer {key}"}
    ) as http:
        await http.put("/v1/customers/acme", json={"name": "Acme"})
        minted = await http.post("/v1/portal-sessions", json={"customer_id": "acme"})
        assert minted.status_code == 201
    page = await context.new_page()
    await sign_in(page, api, key, start="/console/customers")
    acme = page.locator("[data-customer='acme']")
    await expect(acme.locator(".session-state")).to_have_text("unopened")
    await assert_accessible(page)
    await acme.locator("form.inline button", has_text="End it").click()
    await expect(acme.locator(".session-state")).to_have_text("revoked")

    await page.goto(f"{api.base_url}/console/portal-settings")
    form = page.locator("#portal-settings")
    await form.locator("input[name=accent_color]").fill("blue")
    await form.locator("button").click()
    await expect(page.locator("#portal-settings-error")).to_contain_text("accent_color")
    await assert_accessible(page)
    await form.locator("input[name=accent_color]").fill("#112233")
    await form.locator("button").click()
    await expect(form.locator("input[name=accent_color]")).to_have_value("#112233")


async def test_an_endpoint_is_made_and_changed_from_the_console(
    api: ApiProcess, context: BrowserContext, receiver: Receiver, tmp_path: Path
) -> None:
    key = await tenant_with_key(api, "forms")
    page = await context.new_page()
    await sign_in(page, api, key, start="/console/endpoints")
    await page.locator("#new-endpoint").click()
    form = page.locator("#endpoint-form")
    await assert_accessible(page)
    await form.locator("input[name=url]").fill(receiver.url("/made"))
    await form.locator("input[name=event_types]").fill("order.*")
    await form.locator("textarea[name=headers]").fill("{not json")
    await form.locator("button[type=submit]").click()
    await expect(page.locator("#endpoint-error")).to_contain_text("headers: not JSON")
    await assert_accessible(page)
    await form.locator("textarea[name=headers]").fill('{"X-Team": "billing"}')
    await form.locator("select[name=payload_format]").select_option("standard")
    await shoot(page, "endpoint-form", tmp_path)
    await form.locator("button[type=submit]").click()
    secret = await page.locator("#secret").inner_text()
    assert secret.startswith("whsec_")

    await page.locator("a", has_text="See the endpoint").click()
    row = page.locator("#endpoints tbody tr")
    await expect(row).to_have_count(1)
    await expect(row.locator(".event-types")).to_have_text("order.*")
    await row.locator("a.edit").click()
    await form.locator("input[name=description]").fill("Orders, all of them")
    await form.locator("button[type=submit]").click()
    await expect(page.locator("#endpoints tbody tr")).to_contain_text("Orders, all of them")
    await expect(page.locator("#endpoints tbody tr")).to_contain_text("sent as standard")
