"""An endpoint's transformation through the API: checked and bounded when saved (a 422 in words
for a mistake, a cost without bound, a program that gives no map, a CloudEvents endpoint),
kept as versions so deliveries keep theirs, set by a customer only with its session's
capability, and tried on the catalogue's example before it is saved."""

from __future__ import annotations

import json
from html import unescape
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.db import create_sessionmaker
from app.endpoints.repository.transformations import transformation_sent_as
from app.operations.service import retention
from tests.fixtures.api import accept, new_endpoint, portal_bearer
from tests.fixtures.console_forms import sign_in
from tests.fixtures.database import sql

SLACK = '{"body": {"text": "Invoice " + payload.invoice_id + " paid"}, "path": "/ops"}'
EXAMPLE = {"invoice_id": "in_1042", "amount": 4200}
CUBIC = "payload.a.all(x, payload.a.all(y, payload.a.all(z, true)))"


@pytest.mark.parametrize(
    ("transformation", "says"),
    [
        ('{"body": payload.', "not a valid CEL expression: at line 1"),
        ('{"body": paylod.x}', "unknown name paylod: a transformation sees type and payload"),
        ("payload.amount > 1", "a transformation gives a map"),
        ('["body"]', "a transformation gives a map -- body, headers, path, query, skip -- and"),
        ('{"skip": ' + CUBIC + "}", "each turn may cost only what its own element does"),
        ('{"body": "' + "x" * 4000 + '"}', "a transformation is at most 4,000 characters"),
        # A string built from the payload once per element of it: no bound fits a budget.
        ('{"body": payload.a.map(x, payload.a)}', "no bound on this transformation's cost"),
    ],
)
async def test_a_transformation_that_cannot_run_is_refused_when_saved_in_words(
    client: httpx.AsyncClient, tenant: dict[str, str], transformation: str, says: str
) -> None:
    answer = await client.post(
        "/v1/endpoints",
        json={"url": "http://127.0.0.1:9/x", "transformation": transformation},
        headers=tenant,
    )
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert says in answer.json()["detail"]
    assert (await client.get("/v1/endpoints", headers=tenant)).json()["items"] == []


async def test_a_cloudevents_endpoint_refuses_a_transformation_either_way(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    made = await client.post(
        "/v1/endpoints",
        json={
            "url": "http://127.0.0.1:9/x",
            "payload_format": "cloudevents",
            "transformation": SLACK,
        },
        headers=tenant,
    )
    assert made.status_code == 422
    assert "use payload_format raw or standard" in made.json()["detail"]
    endpoint = await new_endpoint(client, tenant, transformation=SLACK)
    changed = await client.patch(
        f"/v1/endpoints/{endpoint['id']}",
        json={"payload_format": "cloudevents-binary"},
        headers=tenant,
    )
    assert changed.status_code == 422
    kept = await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)
    assert kept.json()["payload_format"] == "raw" and kept.json()["transformation"] == SLACK


async def _versions(engine: AsyncEngine, endpoint_id: str) -> list[str | None]:
    async with engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT source FROM transformations WHERE endpoint_id = :e ORDER BY since, id"),
            {"e": endpoint_id},
        )
        return [row.source for row in rows]


async def _sources(engine: AsyncEngine, endpoint_id: str) -> list[str]:
    return [source for source in await _versions(engine, endpoint_id) if source is not None]


async def test_each_change_is_a_version_and_the_audit_trail_has_it(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    endpoint = await new_endpoint(client, tenant, transformation=SLACK)
    path = f"/v1/endpoints/{endpoint['id']}"
    same = await client.patch(path, json={"transformation": SLACK}, headers=tenant)
    other = '{"body": payload}'
    changed = await client.patch(path, json={"transformation": other}, headers=tenant)
    described = await client.patch(path, json={"description": "ops"}, headers=tenant)
    removed = await client.patch(path, json={"transformation": None}, headers=tenant)

    assert [a.status_code for a in (same, changed, described, removed)] == [200] * 4
    assert removed.json()["transformation"] is None
    # The same program again writes nothing; a removal is a version too (None from then on).
    assert await _versions(engine, endpoint["id"]) == [SLACK, other, None]
    trail = await client.get(
        f"/v1/audit-records?subject={endpoint['id']}&action=endpoint.updated", headers=tenant
    )
    # Newest first; a record holds the fields that changed.
    told = [
        (r["before"]["transformation"], r["after"]["transformation"])
        for r in trail.json()["items"]
        if "transformation" in r["after"]
    ]
    assert told == [(other, None), (SLACK, other)]


async def test_a_customer_sets_a_transformation_only_with_the_capability(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    manager = await portal_bearer(client, tenant, "acme", "manage_endpoints")
    transformer = await portal_bearer(
        client, tenant, "acme", "manage_endpoints", "transform_endpoints"
    )
    refused = await client.post(
        "/v1/endpoints",
        json={"url": "http://127.0.0.1:9/x", "transformation": SLACK},
        headers=manager,
    )
    assert refused.status_code == 403
    assert "may not set or try an endpoint's transformation" in refused.json()["detail"]
    mine = await new_endpoint(client, transformer, transformation=SLACK)
    assert mine["customer_id"] == "acme" and mine["transformation"] == SLACK
    path = f"/v1/endpoints/{mine['id']}"
    assert (
        await client.patch(path, json={"transformation": None}, headers=manager)
    ).status_code == 403
    assert (await client.patch(path, json={"description": "d"}, headers=manager)).status_code == 200
    trial = {"event_type": "a.b", "payload": {"invoice_id": "x"}}
    tried = await client.post(f"{path}/transformation/test", json=trial, headers=manager)
    assert tried.status_code == 403
    tried = await client.post(f"{path}/transformation/test", json=trial, headers=transformer)
    assert tried.status_code == 200 and tried.json()["outcome"] == "sent"


async def _trial(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint_id: str, **trial: Any
) -> dict[str, Any]:
    answer = await client.post(
        f"/v1/endpoints/{endpoint_id}/transformation/test", json=trial, headers=tenant
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def test_a_transformation_is_tried_on_the_catalogues_example_before_it_is_saved(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    entry = {"name": "invoice.paid", "schema": {"type": "object"}, "example": EXAMPLE}
    assert (await client.post("/v1/event-types", json=entry, headers=tenant)).status_code == 201
    endpoint = await new_endpoint(client, tenant, url="http://127.0.0.1:9/hooks")
    endpoint_id = endpoint["id"]

    sent = await _trial(
        client, tenant, endpoint_id, transformation=SLACK, event_type="invoice.paid"
    )
    assert sent["outcome"] == "sent" and sent["payload"] == EXAMPLE
    assert sent["request"] == {
        "url": "http://127.0.0.1:9/hooks/ops",
        "headers": {},
        "body": {"text": "Invoice in_1042 paid"},
        "body_made": True,
    }
    assert 0 < sent["bound_steps"] <= 2_000_000
    skipped = await _trial(
        client,
        tenant,
        endpoint_id,
        transformation='{"skip": payload.amount > 1000}',
        event_type="invoice.paid",
    )
    assert skipped["outcome"] == "skipped" and skipped["request"] is None
    failed = await _trial(
        client,
        tenant,
        endpoint_id,
        transformation='{"body": payload.customer}',
        event_type="invoice.paid",
    )
    assert failed["outcome"] == "failed"
    assert failed["error"] == "the transformation failed on this event: no field customer"
    headers = await _trial(
        client,
        tenant,
        endpoint_id,
        transformation='{"headers": {"Idempotency-Key": "mine"}}',
        event_type="invoice.paid",
    )
    assert headers["outcome"] == "failed"
    assert "Idempotency-Key is set by Herald" in headers["error"]

    # Nothing was saved, accepted or sent by any of it.
    kept = await client.get(f"/v1/endpoints/{endpoint_id}", headers=tenant)
    assert kept.json()["transformation"] is None
    assert await _versions(engine, endpoint_id) == []
    assert (await client.get("/v1/deliveries", headers=tenant)).json()["items"] == []


async def test_a_trial_without_what_it_needs_is_refused_in_words(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    plain = await new_endpoint(client, tenant)
    path = f"/v1/endpoints/{plain['id']}/transformation/test"
    cases = [
        ({"event_type": "a.b", "payload": {}}, "has no transformation: give the one to try"),
        ({"transformation": "{}", "event_type": "nowhere.seen"}, "is not in the catalogue"),
        ({"transformation": "1", "event_type": "a.b", "payload": {}}, "gives a map"),
    ]
    for trial, says in cases:
        answer = await client.post(path, json=trial, headers=tenant)
        assert answer.status_code == 422, answer.text
        assert says in answer.json()["detail"]
    unknown = await client.post(
        f"/v1/endpoints/ep_{'0' * 26}/transformation/test",
        json={"transformation": "{}", "event_type": "a.b", "payload": {}},
        headers=tenant,
    )
    assert unknown.status_code == 404


async def test_a_deliverys_page_shows_what_its_transformation_made_of_it(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    endpoint = await new_endpoint(
        client,
        tenant,
        customer_id="acme",
        url="http://127.0.0.1:9/hooks",
        transformation='{"body": {"text": "Invoice " + payload.invoice_id}, "path": "/ops",'
        ' "headers": {"X-Kind": type}}',
    )
    delivery_id = await accept(
        client, tenant, endpoint["id"], event_type="order.paid", payload=EXAMPLE
    )
    # Changed since: the page shows what the delivery is sent as, not the endpoint's new one.
    await client.patch(
        f"/v1/endpoints/{endpoint['id']}",
        json={"transformation": '{"skip": true}'},
        headers=tenant,
    )
    skipped_id = await accept(client, tenant, endpoint["id"], payload=EXAMPLE)

    bearer = await portal_bearer(client, tenant, "acme")
    portal = unescape(
        (await client.get(f"/portal/api/deliveries/{delivery_id}", headers=bearer)).text
    )
    await sign_in(client, tenant["Authorization"].removeprefix("Bearer "))
    console = unescape((await client.get(f"/console/deliveries/{delivery_id}")).text)
    for page in (portal, console):
        assert '"invoice_id": "in_1042"' in page  # its input, the payload
        assert 'id="transformed-url">http://127.0.0.1:9/hooks/ops<' in page
        assert "<dt>X-Kind</dt><dd><code>order.paid</code></dd>" in page
        assert '"text": "Invoice in_1042"' in page  # its output, pretty-printed
    skipped = unescape((await client.get(f"/console/deliveries/{skipped_id}")).text)
    assert "Skipped: the transformation says not to send this event." in skipped
    assert '{"skip": true}' in skipped


async def test_retention_purges_the_versions_no_delivery_is_sent_as(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine, settings: Settings
) -> None:
    endpoint = await new_endpoint(client, tenant, transformation='{"body": {"v": 1}}')
    path = f"/v1/endpoints/{endpoint['id']}"
    sent_as_first = await accept(client, tenant, endpoint["id"])
    for version in (2, 3):  # no delivery accepted while 2 was the endpoint's
        changed = await client.patch(
            path, json={"transformation": f'{{"body": {{"v": {version}}}}}'}, headers=tenant
        )
        assert changed.status_code == 200
    sent_as_third = await accept(client, tenant, endpoint["id"])
    # Every change is past the hour an accept under way is given.
    await sql(engine, "UPDATE transformations SET created_at = now() - interval '2 hours'")

    counts = await retention.purge(settings, create_sessionmaker(engine))

    assert counts["purged_transformations"] == 1
    kept = [json.loads(source)["body"]["v"] for source in await _sources(engine, endpoint["id"])]
    assert kept == [1, 3]
    # Each delivery is still sent as the version it was accepted under.
    async with create_sessionmaker(engine)() as session:
        for delivery_id, v in ((sent_as_first, 1), (sent_as_third, 3)):
            source = await transformation_sent_as(session, endpoint["id"], delivery_id)
            assert source == f'{{"body": {{"v": {v}}}}}'


async def test_the_portal_form_sets_a_transformation_only_for_a_session_that_may(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    manager = await portal_bearer(client, tenant, "acme", "manage_endpoints")
    transformer = await portal_bearer(
        client, tenant, "acme", "manage_endpoints", "transform_endpoints"
    )
    endpoint = await new_endpoint(client, tenant, customer_id="acme")
    path = f"/portal/api/endpoints/{endpoint['id']}"
    # A session without the capability sees no box, and a box sent anyway is not read.
    assert 'name="transformation"' not in (await client.get(f"{path}/edit", headers=manager)).text
    form = {"url": endpoint["url"], "transformation": SLACK}
    assert (await client.post(path, data=form, headers=manager)).status_code == 200
    kept = await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)
    assert kept.json()["transformation"] is None

    assert 'name="transformation"' in (await client.get(f"{path}/edit", headers=transformer)).text
    mistaken = await client.post(
        path, data={**form, "transformation": '{"body": paylod}'}, headers=transformer
    )
    assert mistaken.status_code == 422
    assert 'id="transformation-error"' in mistaken.text and "unknown name paylod" in mistaken.text
    saved = await client.post(path, data=form, headers=transformer)
    assert saved.status_code == 200 and 'id="endpoint-transformation"' in saved.text
    shown = await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)
    assert shown.json()["transformation"] == SLACK
    # A blank box removes it.
    await client.post(path, data={**form, "transformation": ""}, headers=transformer)
    cleared = await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)
    assert cleared.json()["transformation"] is None
