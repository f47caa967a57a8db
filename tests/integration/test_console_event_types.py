"""The console's catalogue: an event type added and changed there is the API's, held to the
same rules (a schema that does not compile, an example the schema refuses, JSON that is not
JSON: each refused in words, nothing stored), and in the audit trail under the console."""

from __future__ import annotations

import json

import httpx

from tests.fixtures.api import new_tenant
from tests.fixtures.console_forms import sign_in

SCHEMA = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}


async def test_an_event_type_is_added_and_changed_from_the_console(
    client: httpx.AsyncClient,
) -> None:
    tenant = await new_tenant(client, "catalogue")
    csrf = await sign_in(client, tenant["Authorization"].removeprefix("Bearer "))
    added = await client.post(
        "/console/event-types",
        data={
            "csrf_token": csrf,
            "name": "order.paid",
            "description": "An order was paid.",
            "schema": json.dumps(SCHEMA),
            "example": '{"amount": 1999}',
        },
    )
    assert added.status_code == 303, added.text
    entry = (await client.get("/v1/event-types/order.paid", headers=tenant)).json()
    assert entry["schema"] == SCHEMA and entry["example"] == {"amount": 1999}
    # The schema now holds at accept.
    refused = await client.post(
        "/v1/events",
        json={"event_type": "order.paid", "payload": {"amount": "50"}},
        headers=tenant,
    )
    assert refused.status_code == 422

    page = await client.get("/console/event-types")
    assert 'data-event-type="order.paid"' in page.text and "An order was paid." in page.text
    changed = await client.post(
        "/console/event-types/order.paid",
        data={"csrf_token": csrf, "description": "Paid in full.", "schema": "", "example": ""},
    )
    assert changed.status_code == 303
    entry = (await client.get("/v1/event-types/order.paid", headers=tenant)).json()
    assert entry["description"] == "Paid in full." and entry["schema"] is None

    trail = (await client.get("/v1/audit-records", headers=tenant)).json()["items"]
    assert [(r["action"], r["actor"]["kind"]) for r in trail[:2]] == [
        ("event_type.updated", "console"),
        ("event_type.created", "console"),
    ]


async def test_what_the_api_refuses_the_console_refuses_in_words(
    client: httpx.AsyncClient,
) -> None:
    tenant = await new_tenant(client, "refusals")
    csrf = await sign_in(client, tenant["Authorization"].removeprefix("Bearer "))
    cases = [
        ({"name": "order.paid", "schema": "{not json"}, "schema: not JSON"),
        ({"name": "order.paid", "schema": '{"type": 12}'}, "schema"),
        (
            {"name": "order.paid", "schema": json.dumps(SCHEMA), "example": '{"amount": "x"}'},
            "example",
        ),
        ({"name": "herald.endpoint.failing"}, "must not start with herald."),
        ({"name": "two words"}, "name: must be 1-255 characters"),
    ]
    for fields, said in cases:
        answer = await client.post("/console/event-types", data={"csrf_token": csrf, **fields})
        assert answer.status_code == 422, (fields, answer.text)
        assert 'role="alert"' in answer.text and said in answer.text, (fields, said)
        # What was typed is still there to be mended.
        assert fields["name"] in answer.text
    listed = (await client.get("/v1/event-types", headers=tenant)).json()["items"]
    assert listed == []
    stale = await client.post("/console/event-types", data={"name": "order.paid"})
    assert stale.status_code == 403
    missing = await client.post(
        "/console/event-types/order.none", data={"csrf_token": csrf, "description": "x"}
    )
    assert missing.status_code == 404


async def test_junk_in_a_console_path_or_filter_is_refused_not_a_fault(
    client: httpx.AsyncClient,
) -> None:
    tenant = await new_tenant(client, "junk")
    csrf = await sign_in(client, tenant["Authorization"].removeprefix("Bearer "))
    path = await client.post("/console/event-types/a%00b", data={"csrf_token": csrf})
    assert path.status_code == 404
    audit = await client.get("/console/audit", params={"subject": "a\x00b"})
    assert audit.status_code == 422 and 'role="alert"' in audit.text
