"""Browser tests: the console driven by Playwright in Debian's Chromium (`make test` installs
it; `playwright install` cannot download a browser here). Every test here starts with empty
tables and an empty Redis, and a real `herald api` process to point the browser at."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, BrowserContext, async_playwright

from tests.fixtures.processes import ApiProcess, start_api, wait_healthy
from tests.fixtures.stack import Stack

CHROMIUM = Path(os.environ.get("HERALD_CHROMIUM", "/usr/bin/chromium"))


@pytest.fixture(autouse=True)
def _starts_clean(clean_slate: None) -> None:
    pass


@pytest.fixture(scope="session")
def chromium() -> Path:
    assert CHROMIUM.exists(), (
        f"no Chromium at {CHROMIUM}: `make test` installs Debian's chromium "
        "(apt-get install chromium), or set HERALD_CHROMIUM to one"
    )
    return CHROMIUM


@pytest.fixture(scope="session")
async def browser(chromium: Path) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(chromium), args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def context(browser: Browser) -> AsyncIterator[BrowserContext]:
    opened = await browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def api(stack: Stack, tmp_path: Path) -> AsyncIterator[ApiProcess]:
    started = start_api(stack, tmp_path)
    try:
        await wait_healthy(started)
        yield started
    finally:
        started.stop()
