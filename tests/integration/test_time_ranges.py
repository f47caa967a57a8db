"""A time range that can match nothing -- its end not after its start -- is refused with 422
saying so, on every route that takes one: the API's bulk redrive and the console's dead-letter
filter (which reads the same schema), rather than a job that redrives 0 or an empty page."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.console_forms import sign_in, tenant_key
from tests.fixtures.waiting import count_rows

SAID = "dead_before must be later than dead_after, or no delivery can match"
LATER = "2026-12-02T00:00:00Z"
EARLIER = "2026-12-01T00:00:00Z"


@pytest.mark.parametrize(
    ("after", "before"),
    [(LATER, EARLIER), (LATER, LATER), ("2026-12-01T01:00:00-02:00", "2026-12-01T02:00:00Z")],
    ids=["inverted", "empty", "inverted-across-zones"],
)
async def test_bulk_redrive_over_a_range_that_matches_nothing_is_422(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine, after: str, before: str
) -> None:
    response = await client.post(
        "/v1/deliveries/redrive",
        json={"dead_after": after, "dead_before": before},
        headers=tenant,
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == f"body: {SAID}"
    assert await count_rows(engine, "redrive_jobs") == 0


@pytest.mark.parametrize(
    "window",
    [
        {"dead_after": EARLIER, "dead_before": LATER},
        {"dead_after": LATER},
        {"dead_before": EARLIER},
    ],
)
async def test_bulk_redrive_over_a_range_that_can_match_starts(
    client: httpx.AsyncClient, tenant: dict[str, str], window: dict[str, str]
) -> None:
    response = await client.post("/v1/deliveries/redrive", json=window, headers=tenant)
    assert response.status_code == 202, response.text


async def test_the_dead_letter_filter_over_an_inverted_range_is_422_saying_so(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    csrf = await sign_in(client, await tenant_key(client, "ranges"))
    window = {"dead_after": "2026-12-02T09:30", "dead_before": "2026-12-01T09:30"}
    page = await client.get("/console/dead", params=window)
    assert page.status_code == 422, page.text
    assert SAID in page.text
    # "Redrive every match" reads the same filter: it starts no job.
    redrive = await client.post("/console/dead/redrive", data={**window, "csrf_token": csrf})
    assert redrive.status_code == 422, redrive.text
    assert SAID in redrive.text
    assert await count_rows(engine, "redrive_jobs") == 0
