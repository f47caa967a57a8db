"""The API's documentation page works with no network beyond the API: /docs (Swagger UI)
references only assets the API serves itself, and each answers with its type.
(tests/browser/test_docs_offline.py renders it in Chromium with every other origin cut off.)"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import httpx

# The attributes by which a page makes the browser fetch something.
FETCHING_ATTRIBUTES = {"src", "href", "spec-url"}
MEDIA_TYPES = {
    ".js": {"text/javascript", "application/javascript"},
    ".css": {"text/css"},
    ".png": {"image/png"},
    ".json": {"application/json"},
}


class References(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found += [value for name, value in attrs if name in FETCHING_ATTRIBUTES and value]


def references(page: str) -> list[str]:
    parser = References()
    parser.feed(page)
    # Swagger UI is told where the document is inside its inline script.
    return parser.found + re.findall(r"\burl: '([^']+)'", page)


async def test_the_docs_page_references_only_assets_the_api_serves(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/docs")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert re.findall(r"https?://[^\s\"'<>]+", response.text) == []  # no other origin at all
    assets = references(response.text)
    assert any(asset.endswith(".js") for asset in assets), assets
    for asset in assets:
        assert asset.startswith("/") and not asset.startswith("//"), asset
        fetched = await client.get(asset)
        assert fetched.status_code == 200, asset
        media_type = fetched.headers["content-type"].partition(";")[0].strip()
        assert media_type in MEDIA_TYPES[asset[asset.rindex(".") :]], (asset, media_type)
        assert fetched.content, asset


async def test_redoc_is_not_served(client: httpx.AsyncClient) -> None:
    # ReDoc's bundle loads its logo from its own CDN whatever it is told: /docs is the page.
    response = await client.get("/redoc")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
