"""The console's endpoint forms: an endpoint made there with every kind of option is the API's
endpoint, its secret shown once; a change sends only what changed and keeps credentials left
empty; what the API refuses the form refuses in the same words, never writing a credential
back into the page."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from tests.fixtures.api import new_tenant
from tests.fixtures.console_forms import sign_in
from tests.fixtures.receiver import Receiver

SECRET_VALUE = "Bearer receivers-own-token"


def _boxes(page: str) -> dict[str, str]:
    """The edit form's text boxes as the page filled them in, and the state it was filled from."""
    boxes = dict(re.findall(r'<input name="([a-z_]+)"[^>]*value="([^"]*)"', page))
    seen = re.search(r'name="seen" value="([^"]*)"', page)
    assert seen is not None
    return {**boxes, "seen": seen.group(1)}


def _form(csrf: str, **fields: str) -> dict[str, str]:
    return {"csrf_token": csrf, **fields}


async def _signed_in(client: httpx.AsyncClient, name: str) -> tuple[dict[str, str], str]:
    tenant = await new_tenant(client, name)
    return tenant, await sign_in(client, tenant["Authorization"].removeprefix("Bearer "))


async def test_an_endpoint_made_with_every_kind_of_option_is_the_apis(
    client: httpx.AsyncClient, receiver: Receiver
) -> None:
    tenant, csrf = await _signed_in(client, "made")
    made = await client.post(
        "/console/endpoints/new",
        data=_form(
            csrf,
            url=receiver.url("/orders"),
            description="Orders",
            event_types="order.paid, order.item.*",
            filter="payload.amount > 100",
            transformation='{"body": {"text": "paid: " + string(payload.amount)}}',
            rate_limit_per_second="2.5",
            max_in_flight="4",
            enabled="on",
            scheme_v1="on",
            scheme_v1a="on",
            payload_format="standard",
            ordering="key",
            on_dead="skip",
            final_statuses="400, 409",
            headers='{"X-Team": "billing"}',
            secret_headers=json.dumps({"X-Api-Key": SECRET_VALUE}),
            oauth2=json.dumps(
                {
                    "token_url": receiver.url("/token"),
                    "client_id": "herald",
                    "client_secret": "oauth-secret-value",
                }
            ),
        ),
    )
    assert made.status_code == 200, made.text
    secret = re.search(r'id="secret">(whsec_[^<]+)<', made.text)
    assert secret is not None
    endpoint_id = re.search(r"Endpoint <code>(ep_[0-9A-Z]+)</code> created", made.text)
    assert endpoint_id is not None
    shown = (await client.get(f"/v1/endpoints/{endpoint_id.group(1)}", headers=tenant)).json()
    expected: dict[str, Any] = {
        "description": "Orders",
        "event_types": ["order.paid", "order.item.*"],
        "filter": "payload.amount > 100",
        "transformation": '{"body": {"text": "paid: " + string(payload.amount)}}',
        "rate_limit_per_second": 2.5,
        "max_in_flight": 4,
        "enabled": True,
        "signature_schemes": ["v1", "v1a"],
        "payload_format": "standard",
        "ordering": "key",
        "on_dead": "skip",
        "final_statuses": [400, 409],
        "headers": {"X-Team": "billing"},
        "secret_header_names": ["X-Api-Key"],
    }
    assert {name: shown[name] for name in expected} == expected
    assert shown["oauth2"]["client_id"] == "herald"
    secret_read = await client.get(f"/v1/endpoints/{endpoint_id.group(1)}/secret", headers=tenant)
    assert secret_read.json()["secret"] == secret.group(1)
    listed = await client.get("/console/endpoints")
    assert secret.group(1) not in listed.text  # shown once
    trail = (await client.get("/v1/audit-records", headers=tenant)).json()["items"]
    assert (trail[0]["action"], trail[0]["actor"]["kind"]) == ("endpoint.created", "console")


async def test_a_change_sends_only_what_changed_and_keeps_credentials_left_empty(
    client: httpx.AsyncClient, receiver: Receiver
) -> None:
    tenant, csrf = await _signed_in(client, "changed")
    made = await client.post(
        "/v1/endpoints",
        json={
            "url": receiver.url("/a"),
            "description": "before",
            "secret_headers": {"Authorization": SECRET_VALUE},
        },
        headers=tenant,
    )
    endpoint_id = made.json()["id"]
    page = await client.get(f"/console/endpoints/{endpoint_id}/edit")
    assert page.status_code == 200 and SECRET_VALUE not in page.text
    assert "Secret headers set: <code>Authorization</code>" in page.text
    # The form as the page filled it in, with only the description changed.
    boxes = _boxes(page.text)
    boxes["description"] = "after"
    changed = await client.post(
        f"/console/endpoints/{endpoint_id}/edit",
        data=_form(
            csrf,
            **boxes,
            enabled="on",
            scheme_v1="on",
            payload_format="raw",
            ordering="none",
            on_dead="halt",
        ),
    )
    assert changed.status_code == 303, changed.text
    now = (await client.get(f"/v1/endpoints/{endpoint_id}", headers=tenant)).json()
    assert now["description"] == "after" and now["secret_header_names"] == ["Authorization"]
    [record] = (
        await client.get("/v1/audit-records", params={"action": "endpoint.updated"}, headers=tenant)
    ).json()["items"]
    assert record["after"] == {"description": "after"}
    assert record["actor"]["kind"] == "console"

    boxes = _boxes((await client.get(f"/console/endpoints/{endpoint_id}/edit")).text)
    removed = await client.post(
        f"/console/endpoints/{endpoint_id}/edit",
        data=_form(
            csrf,
            **boxes,
            enabled="on",
            scheme_v1="on",
            payload_format="raw",
            ordering="none",
            on_dead="halt",
            secret_headers="{}",
        ),
    )
    assert removed.status_code == 303, removed.text
    now = (await client.get(f"/v1/endpoints/{endpoint_id}", headers=tenant)).json()
    assert now["secret_header_names"] == []


async def test_what_the_api_refuses_the_form_refuses_without_echoing_a_credential(
    client: httpx.AsyncClient, receiver: Receiver
) -> None:
    tenant, csrf = await _signed_in(client, "refused")
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    cases = [
        ({"url": receiver.url("/x"), "headers": "{nope"}, "headers: not JSON"),
        ({"url": "ftp://example.com/x"}, "url"),
        ({"url": receiver.url("/x"), "max_in_flight": "many"}, "max_in_flight: "),
        (
            {"url": receiver.url("/x"), "customer_id": "acme", "event_types": "herald.*"},
            "go only to the tenant",
        ),
        ({"url": receiver.url("/x"), "scheme_v1": ""}, "signature_schemes"),
    ]
    for fields, said in cases:
        answer = await client.post(
            "/console/endpoints/new",
            data=_form(
                csrf,
                **{"scheme_v1": "on", **fields},
                secret_headers=json.dumps({"Authorization": SECRET_VALUE}),
            ),
        )
        assert answer.status_code in (400, 422), (fields, answer.status_code)
        assert 'role="alert"' in answer.text and said in answer.text, (fields, said)
        assert SECRET_VALUE not in answer.text and "receivers-own-token" not in answer.text
    assert (await client.get("/v1/endpoints", headers=tenant)).json()["items"] == []
    stale = await client.post("/console/endpoints/new", data={"url": receiver.url("/x")})
    assert stale.status_code == 403


async def test_a_form_opened_before_a_change_cannot_undo_it(
    client: httpx.AsyncClient, receiver: Receiver
) -> None:
    tenant, csrf = await _signed_in(client, "stale")
    made = await client.post("/v1/endpoints", json={"url": receiver.url("/a")}, headers=tenant)
    endpoint_id = made.json()["id"]
    opened = _boxes((await client.get(f"/console/endpoints/{endpoint_id}/edit")).text)
    # Disabled meanwhile (by a person here; a 410 or the failing streak alike).
    disabled = await client.patch(
        f"/v1/endpoints/{endpoint_id}", json={"enabled": False}, headers=tenant
    )
    assert disabled.status_code == 200
    saved = await client.post(
        f"/console/endpoints/{endpoint_id}/edit",
        data=_form(csrf, **{**opened, "description": "late"}, enabled="on", scheme_v1="on"),
    )
    assert saved.status_code == 409
    assert "changed since this form was opened" in saved.text
    now = (await client.get(f"/v1/endpoints/{endpoint_id}", headers=tenant)).json()
    assert now["enabled"] is False and now["description"] is None


async def test_a_polling_endpoint_is_made_shown_and_changed_without_a_url(
    client: httpx.AsyncClient,
) -> None:
    tenant, csrf = await _signed_in(client, "polled")
    made = await client.post(
        "/console/endpoints/new",
        data=_form(
            csrf, delivery="poll", description="the report job", enabled="on", scheme_v1="on"
        ),
    )
    assert made.status_code == 200, made.text
    endpoint_id = re.search(r"Endpoint <code>(ep_[0-9A-Z]+)</code> created", made.text)
    assert endpoint_id is not None
    shown = (await client.get(f"/v1/endpoints/{endpoint_id.group(1)}", headers=tenant)).json()
    assert (shown["delivery"], shown["url"]) == ("poll", None)
    listed = await client.get("/console/endpoints")
    assert "polled by its receiver" in listed.text and ">None<" not in listed.text

    page = await client.get(f"/console/endpoints/{endpoint_id.group(1)}/edit")
    assert "Polled by its receiver" in page.text and 'name="url"' not in page.text
    boxes = {**_boxes(page.text), "description": "the nightly job"}
    changed = await client.post(
        f"/console/endpoints/{endpoint_id.group(1)}/edit",
        data=_form(
            csrf,
            **boxes,
            enabled="on",
            scheme_v1="on",
            payload_format="raw",
            ordering="none",
            on_dead="halt",
        ),
    )
    assert changed.status_code == 303, changed.text
    now = (await client.get(f"/v1/endpoints/{endpoint_id.group(1)}", headers=tenant)).json()
    assert now["description"] == "the nightly job" and now["url"] is None

    # Made without a URL and not polled: the API's words, on the form.
    refused = await client.post(
        "/console/endpoints/new", data=_form(csrf, enabled="on", scheme_v1="on")
    )
    assert "a push endpoint needs the URL" in refused.text
