"""The console on a phone: at 390 x 844 nothing makes the page scroll sideways (a
wide table scrolls inside its own box), the header's dark band spans the content, and the badge
in it is readable: its text's contrast over what is really painted under it is computed in the
page by WCAG's formula."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Browser, Page, ViewportSize, expect
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.console import dead_delivery, shoot, sign_in, tenant_with_key
from tests.fixtures.processes import ApiProcess
from tests.fixtures.receiver import Receiver
from tests.fixtures.stack import ADMIN_KEY, Stack

PHONE: ViewportSize = {"width": 390, "height": 844}

# What overflows the viewport other than inside a box that scrolls it; the page's widths.
GEOMETRY = """() => {
  const viewport = window.innerWidth;
  const scrolledInside = (element) => {
    for (let box = element.parentElement; box; box = box.parentElement) {
      if (["auto", "scroll"].includes(getComputedStyle(box).overflowX)) return true;
    }
    return false;
  };
  const overflowing = [...document.body.querySelectorAll("*")]
    .filter((element) => {
      const box = element.getBoundingClientRect();
      return box.width > 0 && (box.right > viewport + 0.5 || box.left < -0.5)
        && !scrolledInside(element);
    })
    .map((element) => element.tagName.toLowerCase() + (element.id ? "#" + element.id : "")
      + (element.className && typeof element.className === "string"
        ? "." + element.className.trim().split(/\\s+/).join(".") : ""));
  const header = document.querySelector("header.top").getBoundingClientRect();
  const main = document.querySelector("main").getBoundingClientRect();
  return {
    viewport,
    scrollWidth: document.documentElement.scrollWidth,
    overflowing,
    header: [header.left, header.right],
    main: [main.left, main.right],
  };
}"""

# WCAG 2 contrast of the badge's text over the colours painted under its middle: the canvas,
# then every element stacked there up to the badge, each background blended over the ones
# below (a translucent badge is as readable as what shows through it).
BADGE_CONTRAST = """() => {
  const badge = document.querySelector(".badge");
  badge.scrollIntoView({block: "center", inline: "center"});
  const box = badge.getBoundingClientRect();
  const stack = document.elementsFromPoint(box.left + box.width / 2, box.top + box.height / 2);
  if (stack[0] !== badge) return {covered: stack.map((e) => e.tagName).join(" ")};
  const rgba = (css) => {
    const [r, g, b, a = 1] = css.match(/[\\d.]+/g).map(Number);
    return [r, g, b, a];
  };
  const over = ([r, g, b, a], below) =>
    [r, g, b].map((c, i) => c * a + below[i] * (1 - a)).concat(1);
  // The canvas: the root's background, or the body's when the root has none (CSS 2.1 14.2).
  const transparent = (element) => rgba(getComputedStyle(element).backgroundColor)[3] === 0;
  const canvas = transparent(document.documentElement) ? document.body : document.documentElement;
  let under = over(rgba(getComputedStyle(canvas).backgroundColor), [255, 255, 255, 1]);
  for (const element of stack.reverse()) {
    under = over(rgba(getComputedStyle(element).backgroundColor), under);
  }
  const text = over(rgba(getComputedStyle(badge).color), under);
  const luminance = (colour) => {
    const [r, g, b] = colour.slice(0, 3).map((c) => {
      c /= 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const [light, dark] = [luminance(text), luminance(under)].sort((x, y) => y - x);
  return {ratio: (light + 0.05) / (dark + 0.05)};
}"""


async def assert_fits_a_phone(page: Page) -> None:
    shape = await page.evaluate(GEOMETRY)
    where = page.url
    assert shape["overflowing"] == [], where
    assert shape["scrollWidth"] <= shape["viewport"], where
    (header_left, header_right), (main_left, main_right) = shape["header"], shape["main"]
    assert header_left <= main_left and header_right >= main_right, where
    assert header_right >= shape["scrollWidth"], where
    contrast = await page.evaluate(BADGE_CONTRAST)
    assert "covered" not in contrast, (where, contrast)
    assert contrast["ratio"] >= 4.5, (where, contrast)


async def test_every_page_fits_a_phone_with_its_header_across_and_a_readable_badge(
    api: ApiProcess,
    browser: Browser,
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    name = "a-shop-with-a-rather-long-name"
    key = await tenant_with_key(api, name)
    delivery_id = await dead_delivery(api, key, receiver, stack, engine, tmp_path)
    phone = await browser.new_context(viewport=PHONE)
    page = await phone.new_page()
    # An admin's header is the widest: the tenant box besides the badge and sign-out.
    await sign_in(page, api, ADMIN_KEY)
    await page.locator("tr", has_text=name).get_by_role("button", name="View").click()
    await expect(page.locator("tr", has_text=name)).to_contain_text("Viewing")

    for path in (
        "/console",
        "/console/endpoints",
        "/console/dead",
        f"/console/deliveries/{delivery_id}",
        f"/console/search?q={delivery_id}",
        "/console/reconcile",
    ):
        await page.goto(api.base_url + path)
        await assert_fits_a_phone(page)
    # The endpoints table is wider than a phone: it scrolls inside its own box.
    await page.goto(api.base_url + "/console/endpoints")
    scroller = page.locator(".table-scroll").first
    assert await scroller.evaluate("(box) => box.scrollWidth > box.clientWidth")
    await page.goto(f"{api.base_url}/console/deliveries/{delivery_id}")
    await shoot(page, "delivery-narrow", tmp_path)
    await phone.close()
