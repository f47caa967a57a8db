"""The customer portal in a real browser: a tenant's site on another origin frames
it; its customer adds an endpoint, sends a test event, sees what was sent and replays it --
and another customer sees none of it. Checked with axe-core, on a phone, by keyboard."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import httpx
from playwright.async_api import Browser, BrowserContext, expect
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import portal_bearer
from tests.fixtures.portal import assert_accessible, mint, shoot, tenant, tenant_site
from tests.fixtures.processes import ApiProcess, running_worker
from tests.fixtures.receiver import Receiver
from tests.fixtures.stack import Stack
from tests.fixtures.waiting import wait_state

INVOICE_SCHEMA = {
    "type": "object",
    "required": ["invoice_id"],
    "properties": {"invoice_id": {"type": "string"}, "amount": {"type": "integer"}},
    "examples": [{"invoice_id": "in_1", "amount": 4200}],
}


async def _set_up(api: ApiProcess, origin: str) -> dict[str, str]:
    """A tenant with two customers, a catalogue entry and portal settings for its site."""
    auth = await tenant(api, "acme-corp")
    async with httpx.AsyncClient(base_url=api.base_url) as http:
        for customer_id in ("acme", "globex"):
            put = await http.put(f"/v1/customers/{customer_id}", json={}, headers=auth)
            assert put.status_code == 201, put.text
        made = await http.post(
            "/v1/event-types",
            json={
                "name": "invoice.paid",
                "description": "An invoice was paid in full.",
                "schema": INVOICE_SCHEMA,
            },
            headers=auth,
        )
        assert made.status_code == 201, made.text
        settings = await http.put(
            "/v1/portal-settings",
            json={
                "name": "Acme Corp webhooks",
                "logo_url": f"{origin}/logo.svg",
                "accent_color": "#0b5fff",
                "allowed_origins": [origin],
            },
            headers=auth,
        )
        assert settings.status_code == 200, settings.text
    return auth


async def test_a_customer_manages_its_endpoint_in_a_framed_portal_and_another_sees_none(
    api: ApiProcess,
    context: BrowserContext,
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    async with tenant_site() as site:
        auth = await _set_up(api, site.origin)
        minted = await mint(api, auth, "acme", ["manage_endpoints", "replay"])
        page = await context.new_page()
        answer = await page.goto(site.page(minted["url"]))
        assert answer is not None and answer.ok
        portal = page.frame_locator("iframe")
        frame = page.frames[1]

        await expect(portal.locator("h1")).to_have_text("Endpoints")
        await expect(portal.locator(".bar .name")).to_have_text("Acme Corp webhooks")
        # The one-time token left the frame's address as soon as it was used.
        assert "#t=" not in frame.url and minted["url"].split("#t=")[1] not in frame.url
        await assert_accessible(frame)

        # Add an endpoint: a filter that does not compile is refused beside its field.
        await portal.locator("#add-endpoint").click()
        await expect(portal.locator("h1")).to_have_text("Add endpoint")
        await expect(portal.locator("#endpoint-form")).to_contain_text("An invoice was paid")
        await portal.locator("#url").fill(receiver.url("/acme"))
        await portal.get_by_label("Only these:").check()
        await portal.get_by_label("invoice.paid").check()
        await portal.locator("#filter").fill("payload.amount >")
        await portal.locator("#save-endpoint").click()
        await expect(portal.locator("#filter-error")).to_be_visible()
        await expect(portal.locator("#filter")).to_have_attribute("aria-invalid", "true")
        await expect(portal.locator("#url")).to_have_value(receiver.url("/acme"))  # kept
        await assert_accessible(frame)
        await shoot(page, "portal-form", tmp_path)
        await portal.locator("#filter").fill("payload.amount > 100")
        # The customer picks the body and the signatures its receiver wants.
        await portal.get_by_label("Standard Webhooks:").check()
        await portal.locator("input[name=signature_schemes][value=v1a]").check()
        await portal.locator("#save-endpoint").click()
        await expect(portal.locator("h1")).to_have_text("Endpoint")
        await expect(portal.locator("#endpoint-format")).to_have_text("standard")
        await expect(portal.locator("#endpoint-signatures")).to_have_text("v1, v1a")
        endpoint_id = await portal.locator("#endpoint").get_attribute("data-endpoint-id")
        assert endpoint_id is not None and endpoint_id.startswith("ep_")

        # A test event of a type from the catalogue, with its example: a delivery in the log.
        await portal.locator("#send-test").click()
        await expect(portal.locator("h1")).to_have_text("Send a test event")
        await expect(portal.locator("#test-event-form")).to_contain_text('"amount": 4200')
        await portal.get_by_label("invoice.paid").check()
        await portal.locator("#test-event-form summary").first.click()  # its example, shown
        await assert_accessible(frame)
        await shoot(page, "portal-test-event", tmp_path)
        await portal.locator("#send-test-event").click()
        await expect(portal.locator("#tested")).to_be_visible()
        await expect(portal.locator("#delivery-state")).to_have_text("Waiting to be sent")
        await expect(portal.locator("#payload")).to_contain_text('"invoice_id": "in_1"')
        test_id = await portal.locator("h1 code").inner_text()

        # The connection check through the whole path, now, kept nowhere.
        await portal.get_by_role("link", name="Back to the endpoint").click()
        await portal.locator("#send-test").click()
        await portal.locator("#check-connection").click()
        await expect(portal.locator("#verdict")).to_contain_text("Delivered")
        # In the customer's words: no guard, proxy or TLS material of the operator's.
        steps = await portal.locator("#steps").inner_text()
        assert "SSRF" not in steps and "egress proxy" not in steps and "TLS material" not in steps
        assert "an address Herald may send to" in steps
        [tested] = receiver.on("/acme")
        assert tested.headers["webhook-id"].startswith("test_")

        # The secret on demand, then rotated.
        await portal.get_by_role("link", name="Back to the endpoint").click()
        await portal.locator("#show-secret").click()
        secret = await portal.locator("#secret").inner_text()
        assert secret.startswith("whsec_")
        await portal.locator("#rotate-secret").click()
        await expect(portal.locator("#rotated")).to_be_visible()
        assert await portal.locator("#secret").inner_text() != secret

        # The tenant publishes to its customer; a worker delivers it.
        async with httpx.AsyncClient(base_url=api.base_url) as http:
            published = await http.post(
                "/v1/events",
                json={
                    "event_type": "invoice.paid",
                    "payload": {"invoice_id": "in_9", "amount": 4200},
                    "customer_id": "acme",
                },
                headers=auth,
            )
        [delivery] = published.json()["deliveries"]
        with running_worker(stack, tmp_path / "worker.log"):
            await wait_state(engine, delivery["id"], "succeeded")
            await wait_state(engine, test_id, "succeeded")
            await portal.get_by_role("link", name="Back to the endpoint").click()
            test_row = portal.locator(f"tr[data-delivery-id='{test_id}']")
            await expect(test_row).to_contain_text("invoice.paid")
            await expect(test_row).to_contain_text("Delivered")
            row = portal.locator(f"tr[data-delivery-id='{delivery['id']}']")
            await expect(row).to_contain_text("Delivered")
            await expect(portal.locator("#endpoint-health")).to_contain_text("Healthy")
            await assert_accessible(frame)
            await shoot(page, "portal-endpoint", tmp_path)
            await row.get_by_role("link").click()
            await expect(portal.locator("#attempts tbody tr")).to_have_count(1)
            await expect(portal.locator("#attempts")).to_contain_text("200")
            await expect(portal.locator("#attempts")).to_contain_text(" ms")
            # What was sent, as the console shows it.
            await expect(portal.locator("#payload")).to_contain_text('"invoice_id": "in_9"')
            await expect(portal.locator("#delivery-state")).to_have_text("Delivered")
            await shoot(page, "portal-delivery", tmp_path)
            await assert_accessible(frame)
            await portal.locator("#replay-one").click()
            await expect(portal.locator("#replayed")).to_be_visible()
            await wait_state(engine, delivery["id"], "succeeded")
        # The receiver saw the event twice under one id: a replay is a harmless duplicate.
        seen = Counter(r.headers["webhook-id"] for r in receiver.on("/acme"))
        assert seen[delivery["id"]] == 2 and seen[test_id] == 1

        await portal.get_by_role("link", name="Event types").click()
        await expect(portal.locator("#catalogue")).to_contain_text('"amount": 4200')
        await assert_accessible(frame)
        await shoot(page, "portal-catalogue", tmp_path)
        # No cookie anywhere: nothing for third-party-cookie blocking to break.
        assert await context.cookies() == []

        # Another customer, read-only, sees nothing of it.
        other = await mint(api, auth, "globex", [])
        second = await context.new_page()
        await second.goto(site.page(other["url"]))
        theirs = second.frame_locator("iframe")
        await expect(theirs.locator("#endpoint-list")).to_contain_text("No endpoints yet.")
        await expect(theirs.locator("#add-endpoint")).to_have_count(0)
        await assert_accessible(second.frames[1])

    # Acme's ids in Globex's session answer 404, as another tenant's would.
    async with httpx.AsyncClient(base_url=api.base_url) as http:
        globex = await portal_bearer(http, auth, "globex")
        for method, path in (
            ("GET", f"/portal/api/endpoints/{endpoint_id}"),
            ("GET", f"/portal/api/deliveries/{delivery['id']}"),
            ("POST", f"/portal/api/deliveries/{delivery['id']}/replay"),
            ("POST", f"/portal/api/endpoints/{endpoint_id}/secret"),
            ("POST", f"/portal/api/endpoints/{endpoint_id}/delete"),
        ):
            refused = await http.request(method, path, headers=globex)
            assert refused.status_code in (403, 404), (method, path, refused.text)
        # With the right to manage endpoints, still not found: the scope, not the right, decides.
        managing = await portal_bearer(http, auth, "globex", "manage_endpoints", "replay")
        for method, path in (
            ("GET", f"/portal/api/endpoints/{endpoint_id}"),
            ("GET", f"/portal/api/deliveries/{delivery['id']}"),
            ("POST", f"/portal/api/deliveries/{delivery['id']}/replay"),
            ("POST", f"/portal/api/endpoints/{endpoint_id}/secret"),
            ("POST", f"/portal/api/endpoints/{endpoint_id}/delete"),
        ):
            refused = await http.request(method, path, headers=managing)
            assert refused.status_code == 404, (method, path, refused.text)
        still = await http.get(f"/v1/endpoints/{endpoint_id}", headers=auth)
        assert still.status_code == 200  # nothing of Acme's was touched


async def test_only_the_tenants_registered_origins_may_frame_the_portal(
    api: ApiProcess, context: BrowserContext
) -> None:
    async with tenant_site() as registered, tenant_site() as elsewhere:
        auth = await _set_up(api, registered.origin)
        minted = await mint(api, auth, "acme", [])
        page = await context.new_page()
        await page.goto(elsewhere.page(minted["url"]))
        # Chromium refuses to show it (frame-ancestors): the frame holds an error page, never
        # the portal -- whose link, unopened, still works where it may be shown.
        await expect(page.frame_locator("iframe").locator(".bar")).to_have_count(0)
        answer = await page.request.get(minted["url"].split("#")[0])
        policy = answer.headers["content-security-policy"]
        assert f"frame-ancestors {registered.origin};" in policy
        assert "'unsafe-inline'" not in policy and "script-src 'self'" in policy
        await page.goto(registered.page(minted["url"]))
        await expect(page.frame_locator("iframe").locator("h1")).to_have_text("Endpoints")


async def test_a_used_link_opened_again_says_so_in_words(
    api: ApiProcess, context: BrowserContext
) -> None:
    async with tenant_site() as site:
        auth = await _set_up(api, site.origin)
        minted = await mint(api, auth, "acme", [])
        page = await context.new_page()
        await page.goto(site.page(minted["url"]))
        await expect(page.frame_locator("iframe").locator("h1")).to_have_text("Endpoints")
        again = await context.new_page()
        await again.goto(site.page(minted["url"]))
        portal = again.frame_locator("iframe")
        await expect(portal.locator("h1")).to_have_text("Your portal session has ended")
        await expect(portal.locator("main")).to_contain_text("already used (each works once)")
        # Said once: the page says why, and the status line does not say it again.
        said = await portal.locator("body").inner_text()
        assert said.count("already used (each works once)") == 1, said
        await expect(portal.locator("h1")).to_be_focused()
        await assert_accessible(again.frames[1])


async def test_on_a_phone_the_portal_fits_and_works_by_keyboard_alone(
    api: ApiProcess, browser: Browser, receiver: Receiver, tmp_path: Path
) -> None:
    async with tenant_site() as site:
        auth = await _set_up(api, site.origin)
        minted = await mint(api, auth, "acme", ["manage_endpoints"])
        phone = await browser.new_context(viewport={"width": 390, "height": 844})
        try:
            page = await phone.new_page()
            await page.goto(minted["url"])  # opened as a link in a tab, not framed
            await expect(page.locator("h1")).to_have_text("Endpoints")
            # By keyboard: through the header's links to "Add endpoint", then the form.
            for _ in range(10):
                await page.keyboard.press("Tab")
                if await page.evaluate("document.activeElement.id") == "add-endpoint":
                    break
            await page.keyboard.press("Enter")
            await expect(page.locator("h1")).to_have_text("Add endpoint")
            assert await page.evaluate("document.activeElement.tagName") == "H1"  # focus moved
            await page.keyboard.press("Tab")
            await page.keyboard.type(receiver.url("/phone"))
            await page.locator("#url").press("Enter")  # submits the form, as Enter does
            await expect(page.locator("h1")).to_have_text("Endpoint")
            await expect(page.locator("#endpoint")).to_contain_text(receiver.url("/phone"))
            width = await page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, f"the page scrolls sideways: {width} px wide"
            await assert_accessible(page)
            await shoot(page, "portal-phone", tmp_path)
        finally:
            await phone.close()


async def test_a_reload_keeps_the_session_and_the_host_page_hears_the_portal(
    api: ApiProcess, context: BrowserContext
) -> None:
    async with tenant_site() as site:
        auth = await _set_up(api, site.origin)
        minted = await mint(api, auth, "acme", [])
        page = await context.new_page()
        await page.goto(site.page(minted["url"]))
        portal = page.frame_locator("iframe")
        await expect(portal.locator("h1")).to_have_text("Endpoints")
        await portal.get_by_role("link", name="Event types").click()
        await expect(portal.locator("h1")).to_have_text("Event types")

        # F5 inside the frame: the same session, not "ended".
        await page.frames[1].evaluate("location.reload()")
        await expect(portal.locator("h1")).to_have_text("Endpoints")

        heard = await page.evaluate("window.heraldMessages")
        views = [m["view"] for m in heard if m["event"] == "navigation"]
        assert views[:2] == ["/endpoints", "/catalogue"] and views[-1] == "/endpoints", views
        heights = [m["height"] for m in heard if m["event"] == "height"]
        assert heights and all(h > 0 for h in heights)
        assert await page.locator("iframe").get_attribute("height") == str(heights[-1])

        # The session ended by the tenant: the next step says so, and so does the message.
        async with httpx.AsyncClient(base_url=api.base_url) as http:
            revoked = await http.post(
                "/v1/portal-sessions/revoke", json={"customer_id": "acme"}, headers=auth
            )
            assert revoked.json() == {"revoked": 1}
        await portal.get_by_role("link", name="Event types").click()
        await expect(portal.locator("h1")).to_have_text("Your portal session has ended")
        heard = await page.evaluate("window.heraldMessages")
        ended = [m["reason"] for m in heard if m["event"] == "session-ended"]
        assert len(ended) == 1 and "revoked" in ended[0], heard
        # Gone from the tab too: a reload does not bring it back.
        await page.frames[1].evaluate("location.reload()")
        await expect(portal.locator("h1")).to_have_text("Your portal session has ended")
