"""The operator console in a real browser: sign in with a key, find a dead delivery,
redrive it and watch it succeed; the session's guards (CSRF, sign-out, tenants apart)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from playwright.async_api import BrowserContext, expect
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.console import LIVE_WAIT_MS, dead_delivery, shoot, sign_in, tenant_with_key
from tests.fixtures.processes import ApiProcess, running_worker
from tests.fixtures.receiver import Receiver
from tests.fixtures.stack import ADMIN_KEY, Stack
from tests.fixtures.waiting import delivery_row, wait_state


async def test_an_operator_finds_a_dead_delivery_redrives_it_and_sees_it_succeed(
    api: ApiProcess,
    context: BrowserContext,
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    key = await tenant_with_key(api, "shop")
    delivery_id = await dead_delivery(api, key, receiver, stack, engine, tmp_path)
    page = await context.new_page()

    await sign_in(page, api, key, start="/console/dead")
    row = page.locator(f"tr[data-delivery='{delivery_id}']")
    await expect(row).to_contain_text("permanent_failure: HTTP 400")
    await shoot(page, "dead-letters", tmp_path)

    # An overview left open in another tab, counting the dead delivery.
    overview = await context.new_page()
    await overview.goto(api.base_url + "/console")
    await expect(overview.locator(".tile[data-state=dead] .n")).to_have_text("1")

    await row.get_by_role("button", name="Redrive").click()
    await expect(page).to_have_url(f"{api.base_url}/console/deliveries/{delivery_id}")
    await expect(page.locator("#state")).to_have_text(re.compile("pending|enqueued"))
    for open_page in (page, overview):  # gone if the page were loaded again
        await open_page.evaluate("window.notReloaded = true")
    with running_worker(stack, tmp_path / "worker-2.log"):
        await wait_state(engine, delivery_id, "succeeded")
    # Both pages follow by themselves (console.js), without a reload.
    await expect(page.locator("#state")).to_have_text("succeeded", timeout=LIVE_WAIT_MS)
    await expect(overview.locator(".tile[data-state=dead] .n")).to_have_text(
        "0", timeout=LIVE_WAIT_MS
    )
    for open_page in (page, overview):
        assert await open_page.evaluate("window.notReloaded") is True
    await expect(page.locator("#attempts tbody tr")).to_have_count(2)
    await expect(page.locator("#attempts")).to_contain_text("bad signature window")
    await shoot(page, "delivery", tmp_path)

    # The receiver saw the delivery twice, under one id: the 400, then the redrive's 200.
    seen = Counter(r.headers["webhook-id"] for r in receiver.on("/hook"))
    assert seen == {delivery_id: 2}
    # The key went into the form and nowhere else: not a URL, not a page, not a log line.
    assert key not in page.url and key not in await page.content()
    assert key not in api.output()

    await page.goto(api.base_url + "/console")
    await expect(page.locator(".tile[data-state=dead] .n")).to_have_text("0")


async def test_the_session_cookie_is_http_only_and_strict_and_sign_out_ends_it(
    api: ApiProcess, context: BrowserContext, tmp_path: Path
) -> None:
    page = await context.new_page()
    answer = await page.goto(api.base_url + "/console/sign-in")
    assert answer is not None
    # Pages are never framed (clickjacking), cached, or allowed to load or post elsewhere.
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["cache-control"] == "no-store"
    await shoot(page, "sign-in", tmp_path)
    await sign_in(page, api, ADMIN_KEY)
    (cookie,) = await context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/console"
    assert cookie["value"] != ADMIN_KEY
    watching = await context.new_page()  # an overview left open in another tab
    await watching.goto(api.base_url + "/console")

    await page.get_by_role("button", name="Sign out").click()
    await expect(page).to_have_url(api.base_url + "/console/sign-in")
    # The open overview stops following, and says so, rather than showing the sign-in page.
    await expect(watching.locator(".live-note")).to_contain_text(
        "no longer updates itself", timeout=LIVE_WAIT_MS
    )
    await expect(watching.locator("h1")).to_contain_text("Overview")
    # The old cookie, sent again by hand, names no session any more.
    await context.add_cookies(
        [
            {
                "name": cookie["name"],
                "value": cookie["value"],
                "domain": cookie["domain"],
                "path": cookie["path"],
            }
        ]
    )
    await page.goto(api.base_url + "/console/dead")
    await expect(page).to_have_url(f"{api.base_url}/console/sign-in?next=/console/dead")


async def test_a_wrong_key_is_refused_in_words(api: ApiProcess, context: BrowserContext) -> None:
    page = await context.new_page()
    await page.goto(api.base_url + "/console/sign-in")
    await page.fill("#key", "hrk_not-a-key-at-all")
    await page.click("button[type=submit]")
    await expect(page.get_by_role("alert")).to_contain_text("unknown or revoked")
    # Only the sign-in form's own token is kept: no session.
    assert [cookie["name"] for cookie in await context.cookies()] == ["herald_console_form"]


async def test_a_form_without_its_csrf_token_changes_nothing(
    api: ApiProcess,
    context: BrowserContext,
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    key = await tenant_with_key(api, "shop")
    delivery_id = await dead_delivery(api, key, receiver, stack, engine, tmp_path)
    page = await context.new_page()
    await sign_in(page, api, key)
    url = f"{api.base_url}/console/deliveries/{delivery_id}/redrive"

    # The browser's cookie goes along (page.request shares it); the token does not.
    without = await page.request.post(url, form={}, max_redirects=0)
    forged = await page.request.post(url, form={"csrf_token": "guess"}, max_redirects=0)
    assert (without.status, forged.status) == (403, 403)
    assert "stale or was not sent from the console" in await without.text()
    assert (await delivery_row(engine, delivery_id))["state"] == "dead"

    # The same form as the page has it (its token) is taken.
    await page.goto(f"{api.base_url}/console/deliveries/{delivery_id}")
    await page.get_by_role("button", name="Redrive").click()
    await expect(page.locator("#state")).not_to_have_text("dead")


async def test_a_tenant_sees_none_of_another_tenants_deliveries(
    api: ApiProcess,
    context: BrowserContext,
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    theirs = await dead_delivery(
        api, await tenant_with_key(api, "theirs"), receiver, stack, engine, tmp_path
    )
    page = await context.new_page()
    await sign_in(page, api, await tenant_with_key(api, "ours"), start="/console/dead")
    await expect(page.locator("main")).to_contain_text("No dead deliveries")
    token = await page.locator("input[name=csrf_token]").first.input_value()

    response = await page.goto(f"{api.base_url}/console/deliveries/{theirs}")
    assert response is not None and response.status == 404
    await expect(page.get_by_role("alert")).to_contain_text(f"delivery {theirs} not found")
    refused = await page.request.post(
        f"{api.base_url}/console/deliveries/{theirs}/redrive",
        form={"csrf_token": token},
        max_redirects=0,
    )
    assert refused.status == 404
    assert (await delivery_row(engine, theirs))["state"] == "dead"
