"""The portal's requests without a browser: a session's capabilities, its scope, and what its
forms refuse -- each in words, none a 500, nothing written half."""

from __future__ import annotations

import random
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import new_endpoint, portal_bearer
from tests.fixtures.waiting import count_rows


async def test_a_read_only_session_reads_and_may_change_nothing(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    reader = await portal_bearer(client, tenant, "acme")
    endpoint = await new_endpoint(client, tenant, customer_id="acme")
    listed = await client.get("/portal/api/endpoints", headers=reader)
    assert listed.status_code == 200 and endpoint["url"] in listed.text
    assert listed.headers["cache-control"] == "no-store"
    assert "frame-ancestors 'none'" in listed.headers["content-security-policy"]
    for path, said in (
        ("/portal/api/endpoints", "may not manage endpoints"),
        (f"/portal/api/endpoints/{endpoint['id']}/secret", "may not manage endpoints"),
        (f"/portal/api/endpoints/{endpoint['id']}/delete", "may not manage endpoints"),
        (f"/portal/api/endpoints/{endpoint['id']}/replay", "may not replay deliveries"),
    ):
        refused = await client.post(path, data={"url": "http://127.0.0.1:9/x"}, headers=reader)
        assert refused.status_code == 403, path
        assert refused.json()["detail"] == f"this portal session {said}"
    assert await count_rows(engine, "endpoints") == 1


async def test_without_a_session_every_portal_request_is_401_in_words(
    client: httpx.AsyncClient,
) -> None:
    for headers in ({}, {"Authorization": "Bearer hps_nope"}, {"Authorization": "Basic x"}):
        refused = await client.get("/portal/api/endpoints", headers=headers)
        assert refused.status_code == 401
        assert refused.headers["content-type"] == "application/problem+json"
        assert "open the portal again" in refused.json()["detail"]
    # A tenant's API key is no portal session.
    assert (await client.get("/portal/api/catalogue")).status_code == 401


@pytest.mark.parametrize("junk", ["nope", "ep_x", "%00", "dlv_01ARZ3NDEKTSV4RRFFQ69G5FAV"])
async def test_junk_or_foreign_ids_in_portal_paths_are_404(
    client: httpx.AsyncClient, tenant: dict[str, str], junk: str
) -> None:
    manager = await portal_bearer(client, tenant, "acme", "manage_endpoints", "replay")
    for method, path in (
        ("GET", f"/portal/api/endpoints/{junk}"),
        ("GET", f"/portal/api/endpoints/{junk}/edit"),
        ("POST", f"/portal/api/endpoints/{junk}/test"),
        ("GET", f"/portal/api/deliveries/{junk}"),
        ("POST", f"/portal/api/deliveries/{junk}/replay"),
    ):
        refused = await client.request(method, path, headers=manager)
        assert refused.status_code == 404, (method, path, refused.text)


async def test_a_form_that_does_not_hold_comes_back_with_each_mistake_beside_its_field(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    manager = await portal_bearer(client, tenant, "acme", "manage_endpoints")
    fields: dict[str, Any] = {
        "url": "http://127.0.0.1/a b",
        "filter": "payload.amount >",
        "subscribe": "chosen",
        "event_types": ["has space"],
    }
    refused = await client.post("/portal/api/endpoints", data=fields, headers=manager)
    assert refused.status_code == 422
    assert refused.headers["content-type"].startswith("text/html")
    for field in ("url-error", "filter-error", "event-types-error"):
        assert f'id="{field}"' in refused.text, field
    assert "encode a space as %20" in refused.text
    # The SSRF guard refuses beside the URL too; nothing is written.
    guarded = await client.post(
        "/portal/api/endpoints", data={"url": "http://169.254.169.254/latest"}, headers=manager
    )
    assert guarded.status_code == 422 and 'id="url-error"' in guarded.text
    assert await count_rows(engine, "endpoints") == 0


async def test_an_endpoint_made_in_the_portal_is_the_customers_and_reaches_the_tenant(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    manager = await portal_bearer(client, tenant, "acme", "manage_endpoints")
    made = await client.post(
        "/portal/api/endpoints", data={"url": "http://127.0.0.1:9/acme"}, headers=manager
    )
    assert made.status_code == 201
    listed = (await client.get("/v1/endpoints?customer_id=acme", headers=tenant)).json()
    assert [e["url"] for e in listed["items"]] == ["http://127.0.0.1:9/acme"]
    other = await portal_bearer(client, tenant, "globex", "manage_endpoints")
    theirs = await client.get("/portal/api/endpoints", headers=other)
    assert "127.0.0.1:9/acme" not in theirs.text


async def test_replay_since_refuses_a_time_it_cannot_read_or_one_to_come(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    replayer = await portal_bearer(client, tenant, "acme", "replay")
    endpoint = await new_endpoint(client, tenant, customer_id="acme")
    path = f"/portal/api/endpoints/{endpoint['id']}/replay"
    for since, said in (("yesterday", "as a date and time"), ("2999-01-01T00:00", "future")):
        refused = await client.post(path, data={"since": since}, headers=replayer)
        assert refused.status_code == 422 and said in refused.json()["detail"]
    assert await count_rows(engine, "redrive_jobs") == 0


async def test_saving_an_edit_keeps_subscriptions_the_catalogue_does_not_list(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    manager = await portal_bearer(client, tenant, "acme", "manage_endpoints")
    endpoint = await new_endpoint(
        client, tenant, customer_id="acme", event_types=["invoice.*", "order.paid"]
    )
    form = await client.get(f"/portal/api/endpoints/{endpoint['id']}/edit", headers=manager)
    assert form.text.count('name="event_types"') == 2 and "(not in the catalogue)" in form.text
    # What the browser sends back for that form, untouched but for the description.
    fields = {
        "url": endpoint["url"],
        "description": "billing",
        "subscribe": "chosen",
        "event_types": ["invoice.*", "order.paid"],
    }
    saved = await client.post(
        f"/portal/api/endpoints/{endpoint['id']}", data=fields, headers=manager
    )
    assert saved.status_code == 200, saved.text
    now = (await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)).json()
    assert now["event_types"] == ["invoice.*", "order.paid"] and now["description"] == "billing"


async def test_a_replay_time_with_an_offset_of_its_own_is_refused_not_misread(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    replayer = await portal_bearer(client, tenant, "acme", "replay")
    endpoint = await new_endpoint(client, tenant, customer_id="acme")
    refused = await client.post(
        f"/portal/api/endpoints/{endpoint['id']}/replay",
        data={"since": "2026-01-01T00:00+05:00"},
        headers=replayer,
    )
    assert refused.status_code == 422
    assert await count_rows(engine, "redrive_jobs") == 0


_NASTY = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud7ff\ue000",
    "İ",
    "x" * 5000,
    "http://127.0.0.1:9/ok",
    "http://169.254.169.254/",
    "javascript:alert(1)",
    "<script>alert(1)</script>",
    "payload.a > ",
    "payload" + ".a" * 400,
    "[" * 300,
    "size(payload.items.map(x, payload.items.map(y, x)))",
    "order.*",
    "*",
    "'; DROP TABLE endpoints; --",
]


async def test_hostile_portal_forms_are_refused_in_words_never_a_500(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    """Whatever a customer types, the form answers 201 or 422 -- a fuzz over the fields the
    portal's create form has, seeded so that a failure replays."""
    manager = await portal_bearer(client, tenant, "acme", "manage_endpoints")
    pick = random.Random(29)  # noqa: S311 -- a replayable fuzz, not a secret
    made = 0
    for _ in range(150):
        fields: dict[str, Any] = {
            name: pick.choice(_NASTY) + pick.choice(_NASTY)
            for name in ("url", "description", "filter")
            if pick.random() < 0.8
        }
        if pick.random() < 0.5:
            fields["subscribe"] = "chosen"
            fields["event_types"] = [pick.choice(_NASTY) for _ in range(pick.randint(0, 4))]
        answer = await client.post("/portal/api/endpoints", data=fields, headers=manager)
        assert answer.status_code in (201, 422), (fields, answer.status_code, answer.text[:300])
        made += answer.status_code == 201
        if answer.status_code == 422:
            assert answer.headers["content-type"].startswith("text/html")
            assert "<script>alert(1)</script>" not in answer.text  # echoed escaped, if at all
    assert await count_rows(engine, "endpoints") == made
