"""The API's documentation page renders in a browser that can reach nothing but the API: every
request to another origin is cut off (and recorded), as on a machine with no internet."""

from __future__ import annotations

from urllib.parse import urlsplit

from playwright.async_api import BrowserContext, Route, expect

from tests.fixtures.processes import ApiProcess


async def test_the_docs_page_renders_with_every_other_origin_cut_off(
    api: ApiProcess, context: BrowserContext
) -> None:
    origin = urlsplit(api.base_url).netloc
    elsewhere: list[str] = []
    failed: list[str] = []

    async def only_the_api(route: Route) -> None:
        if urlsplit(route.request.url).netloc == origin:
            await route.continue_()
        else:
            elsewhere.append(route.request.url)
            await route.abort()

    await context.route("**/*", only_the_api)
    page = await context.new_page()
    page.on("requestfailed", lambda request: failed.append(request.url))
    await page.goto(api.base_url + "/docs")
    await expect(page.locator(".information-container .title")).to_contain_text("Herald")
    # The document itself was read and drawn: a route of it is on the page.
    await expect(page.get_by_text("/v1/deliveries/batch").first).to_be_visible()
    assert elsewhere == []
    assert failed == []
