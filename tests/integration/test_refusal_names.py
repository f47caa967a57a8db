"""What a tenant reads when its endpoint URL names a refused IP literal: the range the address
is in, by its own name -- not a translation range that merely contains it."""

from __future__ import annotations

import pytest

from app.core.config import Settings
from app.main import create_app
from tests.fixtures.api import new_tenant
from tests.fixtures.stack import client_for


@pytest.mark.parametrize(
    ("url", "detail"),
    [
        ("http://[::1]:9/hook", "::1 is the loopback address (::1/128)"),
        ("http://[::]:9/hook", ":: is the unspecified address (::/128)"),
        ("http://127.0.0.1:9/hook", "127.0.0.1 is a loopback address (127.0.0.0/8)"),
        ("http://[::ffff:127.0.0.1]:9/", "::ffff:7f00:1 is an IPv4-mapped address (::ffff:0:0/96)"),
    ],
)
async def test_a_refused_literal_is_named_by_its_range(
    settings: Settings, url: str, detail: str
) -> None:
    # Loopback is not allowlisted here, as under `herald api` with no allowlist set.
    strict = create_app(settings.model_copy(update={"destination_allowlist": ()}))
    async with strict.router.lifespan_context(strict), client_for(strict) as client:
        tenant = await new_tenant(client, "literal")
        response = await client.post("/v1/endpoints", json={"url": url}, headers=tenant)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == detail
