"""The console's other pages in a real browser: endpoints with their figures and
actions, the overview's chart, search by every handle, reconcile history, and the dead-letter
filter with its bulk redrive."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.async_api import BrowserContext, Dialog, Request, expect
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.console import shoot, sign_in, tenant_with_key
from tests.fixtures.processes import ApiProcess, running_worker
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.stack import ADMIN, ADMIN_KEY, Stack
from tests.fixtures.tls import Authority
from tests.fixtures.waiting import count_rows, eventually, wait_state


async def deliver(
    api: ApiProcess,
    key: str,
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    logs: Path,
    *,
    good: int,
    refused: int,
) -> dict[str, list[str]]:
    """Two endpoints: ``good`` deliveries to one that answers 200, ``refused`` to one that
    answers 400 (dead at once). Returns their ids by endpoint id."""
    receiver.script("/refuses", *[Reply(400, body=b"unknown customer")] * refused)
    tenant = {"Authorization": f"Bearer {key}"}
    made: dict[str, list[str]] = {}
    endings: list[tuple[str, str]] = []  # (delivery id, the state it ends in)
    async with httpx.AsyncClient(base_url=api.base_url, headers=tenant) as http:
        for path, count in (("/accepts", good), ("/refuses", refused)):
            endpoint = (await http.post("/v1/endpoints", json={"url": receiver.url(path)})).json()
            made[endpoint["id"]] = []
            for n in range(count):
                accepted = await http.post(
                    "/v1/deliveries",
                    json={"endpoint_id": endpoint["id"], "event_type": f"order.{path[1:]}",
                          "payload": {"n": n}},
                    headers={"Idempotency-Key": f"order-{path[1:]}-{n}"},
                )  # fmt: skip
                made[endpoint["id"]].append(accepted.json()["id"])
                endings.append(
                    (accepted.json()["id"], "succeeded" if path == "/accepts" else "dead")
                )
    with running_worker(stack, logs / "worker.log"):
        for delivery_id, state in endings:
            await wait_state(engine, delivery_id, state)
    return made


async def test_endpoints_show_their_figures_and_can_be_disabled_enabled_and_rotated(
    api: ApiProcess,
    context: BrowserContext,
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    key = await tenant_with_key(api, "shop")
    made = await deliver(api, key, receiver, stack, engine, tmp_path, good=3, refused=1)
    good, bad = list(made)
    page = await context.new_page()
    await sign_in(page, api, key, start="/console/endpoints")
    await expect(page.locator(f"tr[data-endpoint='{good}']")).to_contain_text("100.0 % of 3")
    await expect(page.locator(f"tr[data-endpoint='{good}'] .condition")).to_have_text("delivering")
    await expect(page.locator(f"tr[data-endpoint='{bad}']")).to_contain_text("0.0 % of 1")
    await expect(page.locator(f"tr[data-endpoint='{good}']")).to_contain_text(" ms")
    await expect(page.locator(f"tr[data-endpoint='{good}']")).to_contain_text("0 / 50")
    await shoot(page, "endpoints", tmp_path)

    row = page.locator(f"tr[data-endpoint='{good}']")
    dead_link = row.get_by_role("link", name="its dead letters")
    await expect(dead_link).to_have_attribute("href", f"/console/dead?endpoint_id={good}")
    # Disabling asks first; answered "no", nothing is sent.
    asked: list[str] = []
    posted: list[str] = []

    async def say_no(dialog: Dialog) -> None:
        asked.append(dialog.message)
        await dialog.dismiss()

    def note_post(request: Request) -> None:
        if request.method == "POST":
            posted.append(request.url)

    page.on("request", note_post)
    page.once("dialog", say_no)
    await row.get_by_role("button", name="Disable").click()
    await page.reload()  # a round trip after the click: a POST it sent would be before it
    assert len(asked) == 1 and "Nothing is sent to it until it is enabled again" in asked[0]
    assert posted == []
    await expect(row.locator(".condition")).to_have_text("delivering")
    assert await count_rows(engine, "endpoints", "id = :e AND enabled", e=good) == 1
    # Answered "yes", it is.
    page.on("dialog", lambda dialog: dialog.accept())
    await row.get_by_role("button", name="Disable").click()
    await expect(row.locator(".condition")).to_contain_text("disabled: disabled by user")
    assert await count_rows(engine, "endpoints", "id = :e AND NOT enabled", e=good) == 1
    await row.get_by_role("button", name="Enable").click()
    await expect(row.locator(".condition")).to_have_text("delivering")

    tenant = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=api.base_url, headers=tenant) as http:
        before = (await http.get(f"/v1/endpoints/{good}/secret")).json()["secret"]
        await row.get_by_role("button", name="Rotate secret").click()
        shown = await page.locator("#secret").inner_text()
        now = (await http.get(f"/v1/endpoints/{good}/secret")).json()["secret"]
    assert shown == now != before and shown.startswith("whsec_")
    assert shown not in page.url

    # What is configured is shown; a secret never is.
    async with httpx.AsyncClient(base_url=api.base_url, headers=tenant) as http:
        changed = await http.patch(
            f"/v1/endpoints/{good}",
            json={"signature_schemes": ["v1", "v1a"], "secret_headers": {"X-Api-Key": "k-hidden"}},
        )
    public_key = changed.json()["public_key"]
    await page.goto(f"{api.base_url}/console/endpoints")
    row = page.locator(f"tr[data-endpoint='{good}']")
    await expect(row.locator(".signing")).to_contain_text("signed v1 and v1a, public key")
    await expect(row.locator(".public-key")).to_have_text(public_key)
    await expect(row.locator(".secret-headers")).to_contain_text("X-Api-Key")
    assert "k-hidden" not in await page.content() and "whsk_" not in await page.content()

    # Mutual TLS (replaced once: the fallback shown) and OAuth2, configured; no key, no secret.
    authority = Authority(tmp_path / "ca")
    old_cert, old_key = authority.client_certificate("console-old")
    new_cert, new_key = authority.client_certificate("console-new")
    async with httpx.AsyncClient(base_url=api.base_url, headers=tenant) as http:
        secured = await http.post(
            "/v1/endpoints",
            json={
                "url": "https://127.0.0.1:9/secured",
                "tls": {"client_certificate": old_cert, "client_key": old_key},
                "egress_proxy": {"url": "http://proxy-user:proxy-hidden@127.0.0.1:3128"},
                "oauth2": {
                    "token_url": "https://127.0.0.1:9/token",
                    "client_id": "console-client",
                    "client_secret": "oauth-hidden",
                },
            },
        )
        assert secured.status_code == 201, secured.text
        replaced = {"tls": {"client_certificate": new_cert, "client_key": new_key}}
        assert (await http.patch(f"/v1/endpoints/{secured.json()['id']}", json=replaced)).is_success
    await page.goto(f"{api.base_url}/console/endpoints")
    row_tls = page.locator(f"tr[data-endpoint='{secured.json()['id']}']")
    await expect(row_tls.locator(".client-certificate")).to_have_text("CN=console-new")
    await expect(row_tls.locator(".previous-certificate")).to_have_text("CN=console-old")
    await expect(row_tls.locator(".oauth2")).to_contain_text("console-client")
    await expect(row_tls.locator(".egress-proxy")).to_contain_text("http://127.0.0.1:3128")
    content = await page.content()
    assert "oauth-hidden" not in content and "proxy-hidden" not in content

    # A receiver that consented in the webhook handshake, and the rate it allowed.
    receiver.script(
        "/consents", Reply(headers={"WebHook-Allowed-Origin": "*", "WebHook-Allowed-Rate": "90"})
    )
    async with httpx.AsyncClient(base_url=api.base_url, headers=tenant) as http:
        consented = await http.post(
            "/v1/endpoints", json={"url": receiver.url("/consents"), "webhook_handshake": True}
        )
        assert consented.status_code == 201, consented.text
    await page.goto(f"{api.base_url}/console/endpoints")
    row_consented = page.locator(f"tr[data-endpoint='{consented.json()['id']}']")
    await expect(row_consented.locator(".handshake")).to_contain_text("at most 90 a minute")
    assert new_key.splitlines()[1] not in content and old_key.splitlines()[1] not in content

    # A test event, from the row: each step shown, the receiver's answer.
    before_test = len(receiver.requests)
    await row.get_by_role("button", name="Send test event").click()
    await expect(page.locator("#verdict")).to_contain_text("Delivered")
    await expect(page.locator("#steps tr[data-step='request']")).to_contain_text("HTTP 200")
    await expect(page.locator("#steps tr[data-step='signature']")).to_contain_text("v1 and v1a")
    assert len(receiver.requests) == before_test + 1
    assert receiver.requests[-1].headers["X-Api-Key"] == "k-hidden"


async def test_the_overview_draws_the_last_hours_attempts_by_outcome(
    api: ApiProcess,
    context: BrowserContext,
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    key = await tenant_with_key(api, "shop")
    await deliver(api, key, receiver, stack, engine, tmp_path, good=3, refused=2)
    page = await context.new_page()
    await sign_in(page, api, key)
    chart = page.locator("#attempts-chart")
    await expect(chart.locator("rect.o-success")).not_to_have_count(0)
    await expect(chart.locator("rect.o-permanent")).not_to_have_count(0)
    await expect(page.locator(".chart figcaption")).to_contain_text("success 3")
    await expect(page.locator(".chart figcaption")).to_contain_text("permanent 2")
    await expect(page.locator(".tile[data-state=dead] .n")).to_have_text("2")
    await shoot(page, "overview", tmp_path)
    # Another tenant's overview counts none of it.
    other = await context.browser.new_context()  # type: ignore[union-attr]
    theirs = await other.new_page()
    await sign_in(theirs, api, await tenant_with_key(api, "other"))
    await expect(theirs.locator(".chart figcaption")).to_contain_text("success 0")
    await expect(theirs.locator(".tile[data-state=dead] .n")).to_have_text("0")
    await other.close()


async def test_search_finds_a_delivery_by_id_event_and_idempotency_key(
    api: ApiProcess,
    context: BrowserContext,
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    key = await tenant_with_key(api, "shop")
    made = await deliver(api, key, receiver, stack, engine, tmp_path, good=2, refused=0)
    ids = next(iter(made.values()))  # the endpoint that accepts
    async with httpx.AsyncClient(base_url=api.base_url) as http:
        detail = await http.get(
            f"/v1/deliveries/{ids[1]}", headers={"Authorization": f"Bearer {key}"}
        )
    event_id = detail.json()["event_id"]
    page = await context.new_page()
    await sign_in(page, api, key, start="/console/search")
    for query, matched in (
        (ids[1], "delivery id"),
        (event_id, "event id"),
        ("order-accepts-1", "idempotency key"),
    ):
        await page.fill("input[name=q]", query)
        await page.get_by_role("button", name="Find").click()
        await expect(page.locator("main")).to_contain_text(f"1 delivery by {matched}")
        await expect(page.locator("#found")).to_contain_text(ids[1])
    await shoot(page, "search", tmp_path)
    await page.fill("input[name=q]", "no-such-key")
    await page.get_by_role("button", name="Find").click()
    await expect(page.get_by_role("status")).to_contain_text(
        "Nothing found by that idempotency key"
    )
    assert await page.locator("#found").count() == 0

    # An admin finds it without knowing whose it is, and is offered that tenant.
    admin = await context.browser.new_context()  # type: ignore[union-attr]
    page = await admin.new_page()
    await sign_in(page, api, ADMIN_KEY, start="/console/search")
    await page.fill("input[name=q]", ids[0])
    await page.get_by_role("button", name="Find").click()
    await page.get_by_role("button", name="View that tenant").click()
    await expect(page.locator("#found")).to_contain_text(ids[0])
    await admin.close()


async def test_reconcile_runs_are_listed_with_their_result(
    api: ApiProcess, context: BrowserContext, stack: Stack, engine: AsyncEngine, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(base_url=api.base_url, headers=ADMIN) as http:
        started = await http.post("/v1/reconcile", json={"trigger": "cron"})
    run_id = started.json()["run_id"]

    async def finished() -> int:
        return await count_rows(engine, "reconcile_runs", "finished_at IS NOT NULL")

    with running_worker(stack, tmp_path / "worker.log"):  # a worker runs it
        await eventually(finished, lambda n: n == 1)
    page = await context.new_page()
    await sign_in(page, api, ADMIN_KEY, start="/console/reconcile")
    row = page.locator("tr", has_text=run_id)
    await expect(row).to_contain_text("cron")
    await expect(row).to_contain_text("succeeded")
    await shoot(page, "reconcile", tmp_path)


async def test_dead_letters_filter_and_redrive_every_match(
    api: ApiProcess,
    context: BrowserContext,
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    key = await tenant_with_key(api, "shop")
    made = await deliver(api, key, receiver, stack, engine, tmp_path, good=0, refused=3)
    dead = made[list(made)[1]]
    page = await context.new_page()
    await sign_in(page, api, key, start="/console/dead")
    await expect(page.locator("#dead tbody tr")).to_have_count(3)
    # A filter that matches nothing, then one in words that cannot be read.
    await page.fill("input[name=event_type]", "invoice.*")
    await page.get_by_role("button", name="Filter").click()
    await expect(page.locator("main")).to_contain_text("No dead deliveries match this filter")
    response = await page.goto(f"{api.base_url}/console/dead?dead_after=yesterday")
    assert response is not None and response.status == 422
    await expect(page.get_by_role("alert")).to_contain_text("Died after: give a date and time")

    await page.goto(f"{api.base_url}/console/dead?event_type=order.*")
    page.on("dialog", lambda dialog: dialog.accept())  # "every match, not only this page?"
    await page.get_by_role(
        "button", name="Redrive every dead delivery matching this filter"
    ).click()
    await expect(page.locator("h1")).to_contain_text("Bulk redrive")
    with running_worker(stack, tmp_path / "worker-2.log"):
        for delivery_id in dead:
            await wait_state(engine, delivery_id, "succeeded")
    # The job's page refreshes itself while the job is queued or running (a meta refresh):
    # a reload of our own could meet one under way ("not attached to an active page").
    await expect(page.locator("#job-status")).to_have_text("succeeded", timeout=20_000)
    await expect(page.locator("#redriven")).to_have_text("3")
