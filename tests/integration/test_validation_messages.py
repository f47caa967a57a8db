"""Validation answers in words: what is allowed, never the regular expression behind a rule; and
times are checked for range up front rather than failing later in a job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.schema_inputs import datetime_inputs, patterned_inputs
from tests.fixtures.stack import ADMIN
from tests.fixtures.waiting import count_rows

PROBLEM = "application/problem+json"
UNKNOWN_ENDPOINT = "ep_01ARZ3NDEKTSV4RRFFQ69G5FAV"
# `$` matches before a final line break: every rule must hold the whole string.
ENDPOINT_ID_NL = UNKNOWN_ENDPOINT + "\n"
EVENT_ID_NL = "evt_01ARZ3NDEKTSV4RRFFQ69G5FAV\n"
REGEX_SIGNS = ("pattern", "^", "$", "\\x", "[", "]", "{", "(?")


def _delivery(**fields: Any) -> dict[str, Any]:
    return {"endpoint_id": UNKNOWN_ENDPOINT, "event_type": "a", "payload": {}, **fields}


VALUE = "<the value>"  # where a case's request template takes the value under test


def _fill(template: Any, value: str) -> Any:
    if template == VALUE:
        return value
    if isinstance(template, dict):
        return {name: _fill(item, value) for name, item in template.items()}
    if isinstance(template, list):
        return [_fill(item, value) for item in template]
    return template


@dataclass(frozen=True)
class Case:
    field: str  # as tests.fixtures.schema_inputs.patterned_inputs names it
    route: str  # "METHOD /path"
    request: dict[str, Any]  # httpx keywords (json or params), VALUE where the value goes
    loc: str  # where the problem says the value was
    bad: tuple[str, ...]
    says: str  # what the message says is allowed
    admin: bool = False


EVENT_TYPE = "letters, digits and _ . : - / (starting with a letter or digit)"
SELECTOR = "* for every type, or a prefix and .* (order.* selects order.paid"
BAD_EVENT_TYPES = ("has space", "a\x00b", "", ".dot-first", "x" * 256, "tab\t", "nl.test\n")
PRINTABLE = "printable text: no NUL or other control characters except tab and line breaks"
ENDPOINT_ID = "an endpoint id (ep_ followed by 26 capital letters and digits)"
EVENT_ID = "an event id (evt_ followed by 26 capital letters and digits)"
TENANT_ID = "a tenant id (ten_ followed by 26 capital letters and digits)"
KEY_ID = "an API key id (key_ followed by 26 capital letters and digits)"
URL = "URL without spaces or control characters (encode a space as %20)"
BAD_URLS = (
    "http://127.0.0.1/a b", "http://127.0.0.1/\x00", "http://127.0.0.1/\x7f", " ",
    "http://127.0.0.1/\n",
)  # fmt: skip
ORDERING_KEY = "1-255 visible ASCII characters (! to ~, no spaces)"
BAD_ORDERING_KEYS = ("", "has space", "k\x00", "café", "x" * 256, "k\n")
UPDATE = f"PATCH /v1/endpoints/{UNKNOWN_ENDPOINT}"
CUSTOMER_ID = "1-128 characters: letters, digits and _ . : @ + - (starting with a letter"
BAD_CUSTOMER_IDS = ("", "has space", "c\x00", "café", "x" * 129, "-dash", "c\n")
CASES = [
    Case("DeliveryIntent.event_type", "POST /v1/deliveries",
         {"json": _delivery(event_type=VALUE)}, "body.event_type", BAD_EVENT_TYPES, EVENT_TYPE),
    Case("DeliveryIntent.endpoint_id", "POST /v1/deliveries",
         {"json": _delivery(endpoint_id=VALUE)}, "body.endpoint_id",
         ("nope", "ep_\x00", ENDPOINT_ID_NL), ENDPOINT_ID),
    Case("EventIntent.event_type", "POST /v1/events",
         {"json": {"event_type": VALUE, "payload": {}}}, "body.event_type", BAD_EVENT_TYPES,
         EVENT_TYPE),
    Case("TestEventRequest.event_type", f"POST /v1/endpoints/{UNKNOWN_ENDPOINT}/test-events",
         {"json": {"event_type": VALUE}}, "body.event_type", BAD_EVENT_TYPES, EVENT_TYPE),
    Case("TransformationTrial.event_type",
         f"POST /v1/endpoints/{UNKNOWN_ENDPOINT}/transformation/test",
         {"json": {"event_type": VALUE}}, "body.event_type", BAD_EVENT_TYPES, EVENT_TYPE),
    Case("TenantSettingsChange.cloudevents_source", "PATCH /v1/tenant",
         {"json": {"cloudevents_source": VALUE}}, "body.cloudevents_source",
         ("has space", "a\x00b", "caf\u00e9", "nl\n", "<x>"), "must be a URI reference"),
    Case("BatchItem.event_type", "POST /v1/deliveries/batch",
         {"json": {"items": [_delivery(event_type=VALUE)]}}, "event_type", BAD_EVENT_TYPES,
         EVENT_TYPE),
    Case("BatchItem.endpoint_id", "POST /v1/deliveries/batch",
         {"json": {"items": [_delivery(endpoint_id=VALUE)]}}, "endpoint_id", ("nope",),
         ENDPOINT_ID),
    Case("BatchItem.idempotency_key", "POST /v1/deliveries/batch",
         {"json": {"items": [_delivery(idempotency_key=VALUE)]}}, "idempotency_key",
         ("", "k\x00", "café", "x" * 256, "k\n"), "1-255 printable ASCII characters"),
    Case("DeliveryIntent.ordering_key", "POST /v1/deliveries",
         {"json": _delivery(ordering_key=VALUE)}, "body.ordering_key", BAD_ORDERING_KEYS,
         ORDERING_KEY),
    Case("EventIntent.ordering_key", "POST /v1/events",
         {"json": {"event_type": "a.b", "payload": {}, "ordering_key": VALUE}},
         "body.ordering_key", BAD_ORDERING_KEYS, ORDERING_KEY),
    Case("BatchItem.ordering_key", "POST /v1/deliveries/batch",
         {"json": {"items": [_delivery(ordering_key=VALUE)]}}, "ordering_key",
         BAD_ORDERING_KEYS, ORDERING_KEY),
    Case("RedriveFilter.event_type", "POST /v1/deliveries/redrive",
         {"json": {"event_type": VALUE}}, "body.event_type", BAD_EVENT_TYPES, SELECTOR),
    Case("RedriveFilter.endpoint_id", "POST /v1/deliveries/redrive",
         {"json": {"endpoint_id": VALUE}}, "body.endpoint_id", ("nope", "\x00"), ENDPOINT_ID),
    Case("GET /v1/deliveries?event_type", "GET /v1/deliveries",
         {"params": {"event_type": VALUE}}, "query.event_type", BAD_EVENT_TYPES, SELECTOR),
    Case("GET /v1/deliveries?endpoint_id", "GET /v1/deliveries",
         {"params": {"endpoint_id": VALUE}}, "query.endpoint_id", ("nope", "\x00"), ENDPOINT_ID),
    Case("GET /v1/deliveries?event_id", "GET /v1/deliveries",
         {"params": {"event_id": VALUE}}, "query.event_id", ("nope", "\x00", "ep_x", EVENT_ID_NL),
         EVENT_ID),
    Case("GET /v1/audit-records?subject", "GET /v1/audit-records",
         {"params": {"subject": VALUE}}, "query.subject", ("two words", "\x00", "-x"),
         "must be what was changed"),
    Case("GET /v1/audit-records?action", "GET /v1/audit-records",
         {"params": {"action": VALUE}}, "query.action", ("drop table", "\x00", "Endpoint.x"),
         "must be an action, such as endpoint.updated"),
    Case("EndpointCreate.url", "POST /v1/endpoints",
         {"json": {"url": VALUE}}, "body.url", BAD_URLS, URL),
    Case("EndpointCreate.description", "POST /v1/endpoints",
         {"json": {"url": "http://127.0.0.1/", "description": VALUE}}, "body.description",
         ("a\x00b", "bell\x07"), PRINTABLE),
    Case("EndpointCreate.event_types", "POST /v1/endpoints",
         {"json": {"url": "http://127.0.0.1/", "event_types": ["ok", VALUE]}},
         "body.event_types.1", BAD_EVENT_TYPES, SELECTOR),
    Case("EndpointUpdate.url", UPDATE, {"json": {"url": VALUE}}, "body.url", BAD_URLS, URL),
    Case("EndpointUpdate.description", UPDATE,
         {"json": {"description": VALUE}}, "body.description", ("a\x00b",), PRINTABLE),
    Case("EndpointUpdate.event_types", UPDATE,
         {"json": {"event_types": [VALUE]}}, "body.event_types.0", BAD_EVENT_TYPES, SELECTOR),
    Case("ReconcileRequest.trigger", "POST /v1/reconcile",
         {"json": {"trigger": VALUE}}, "body.trigger",
         ("cron job", "c\x00n", "", "x" * 101, "cron\n"),
         "1-100 characters: letters, digits and _ . : -", admin=True),
    Case("TenantCreate.name", "POST /v1/tenants",
         {"json": {"name": VALUE}}, "body.name", ("two\nlines", "nul\x00", "tab\t", "acme\n"),
         "printable text on one line", admin=True),
    Case("EventTypeCreate.name", "POST /v1/event-types",
         {"json": {"name": VALUE}}, "body.name", BAD_EVENT_TYPES, EVENT_TYPE),
    Case("EventTypeCreate.description", "POST /v1/event-types",
         {"json": {"name": "a.b", "description": VALUE}}, "body.description",
         ("a\x00b", "bell\x07"), PRINTABLE),
    Case("EventTypeUpdate.description", "PATCH /v1/event-types/a.b",
         {"json": {"description": VALUE}}, "body.description", ("a\x00b",), PRINTABLE),
    Case("ApiKeyCreate.label", "POST /v1/api-keys",
         {"json": {"label": VALUE}}, "body.label", ("two\nlines", "nul\x00", "tab\t", "ci\n"),
         "printable text on one line"),
    Case("ApiKeyCreate.tenant_id", "POST /v1/api-keys",
         {"json": {"tenant_id": VALUE}}, "body.tenant_id", ("nope", "ep_x", "\x00"), TENANT_ID,
         admin=True),
    Case("ApiKeyCreate.endpoint_id", "POST /v1/api-keys",
         {"json": {"endpoint_id": VALUE}}, "body.endpoint_id", ("nope", "\x00"), ENDPOINT_ID),
    Case("EndpointCreate.customer_id", "POST /v1/endpoints",
         {"json": {"url": "http://127.0.0.1/", "customer_id": VALUE}}, "body.customer_id",
         BAD_CUSTOMER_IDS, CUSTOMER_ID),
    Case("EventIntent.customer_id", "POST /v1/events",
         {"json": {"event_type": "a.b", "payload": {}, "customer_id": VALUE}},
         "body.customer_id", BAD_CUSTOMER_IDS, CUSTOMER_ID),
    Case("GET /v1/endpoints?customer_id", "GET /v1/endpoints",
         {"params": {"customer_id": VALUE}}, "query.customer_id", BAD_CUSTOMER_IDS[1:],
         CUSTOMER_ID),
    Case("CustomerPut.name", "PUT /v1/customers/acme",
         {"json": {"name": VALUE}}, "body.name", ("two\nlines", "nul\x00", "tab\t", "acme\n"),
         "printable text on one line"),
    Case("PortalSessionCreate.customer_id", "POST /v1/portal-sessions",
         {"json": {"customer_id": VALUE}}, "body.customer_id", BAD_CUSTOMER_IDS, CUSTOMER_ID),
    Case("PortalSessionsRevoke.customer_id", "POST /v1/portal-sessions/revoke",
         {"json": {"customer_id": VALUE}}, "body.customer_id", BAD_CUSTOMER_IDS, CUSTOMER_ID),
    Case("GET /v1/portal-sessions?customer_id", "GET /v1/portal-sessions",
         {"params": {"customer_id": VALUE}}, "query.customer_id", BAD_CUSTOMER_IDS[1:],
         CUSTOMER_ID),
    Case("PortalSessionsRevoke.api_key_id", "POST /v1/portal-sessions/revoke",
         {"json": {"api_key_id": VALUE}}, "body.api_key_id", ("nope", "ep_x", "\x00"), KEY_ID),
    Case("GET /v1/portal-sessions?api_key_id", "GET /v1/portal-sessions",
         {"params": {"api_key_id": VALUE}}, "query.api_key_id", ("nope", "\x00"), KEY_ID),
    Case("PortalSettingsPut.name", "PUT /v1/portal-settings",
         {"json": {"name": VALUE}}, "body.name", ("two\nlines", "nul\x00", "tab\t"),
         "printable text on one line"),
    Case("PortalSettingsPut.logo_url", "PUT /v1/portal-settings",
         {"json": {"logo_url": VALUE}}, "body.logo_url",
         ("ftp://a.test/x.png", "https://a.test/x y", "https://a.test/\x00", "data:x"),
         "an http:// or https:// URL of at most 1,000 visible characters"),
    Case("PortalSettingsPut.accent_color", "PUT /v1/portal-settings",
         {"json": {"accent_color": VALUE}}, "body.accent_color", ("red", "#12345", "#1234567\n"),
         "a colour as #rrggbb"),
    Case("PortalSettingsPut.allowed_origins", "PUT /v1/portal-settings",
         {"json": {"allowed_origins": [VALUE]}}, "body.allowed_origins.0",
         ("*", "https://a.test/", "a.test", "https://a.test\n", "'self'"),
         "must be an origin: http:// or https://"),
    Case("PortalSettingsPatch.name", "PATCH /v1/portal-settings",
         {"json": {"name": VALUE}}, "body.name", ("two\nlines", "nul\x00"),
         "printable text on one line"),
    Case("PortalSettingsPatch.logo_url", "PATCH /v1/portal-settings",
         {"json": {"logo_url": VALUE}}, "body.logo_url", ("ftp://a.test/x.png", "data:x"),
         "an http:// or https:// URL of at most 1,000 visible characters"),
    Case("PortalSettingsPatch.accent_color", "PATCH /v1/portal-settings",
         {"json": {"accent_color": VALUE}}, "body.accent_color", ("red", "#12345"),
         "a colour as #rrggbb"),
    Case("PortalSettingsPatch.allowed_origins", "PATCH /v1/portal-settings",
         {"json": {"allowed_origins": [VALUE]}}, "body.allowed_origins.0",
         ("*", "https://a.test/"), "must be an origin: http:// or https://"),
    Case("GET /v1/api-keys?tenant_id", "GET /v1/api-keys",
         {"params": {"tenant_id": VALUE}}, "query.tenant_id", ("nope", "\x00"), TENANT_ID,
         admin=True),
]  # fmt: skip


def test_every_field_held_to_a_text_rule_is_covered(app: FastAPI) -> None:
    assert set(patterned_inputs(app)) == {case.field for case in CASES}


def _messages(response: httpx.Response, case: Case) -> str:
    """The problem's detail (and each listed error): for a batch, the item's problem."""
    problem = response.json()
    if case.route.endswith("/batch"):
        assert response.status_code == 200, response.text
        problem = problem["items"][0]["error"]
    assert problem["status"] == 422, response.text
    return " | ".join([problem["detail"], *(e["msg"] for e in problem.get("errors", []))])


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.field)
async def test_a_refused_value_is_explained_in_words_not_a_regex(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine, case: Case
) -> None:
    method, path = case.route.split(" ")
    for value in case.bad:
        request = _fill(case.request, value)
        response = await client.request(
            method, path, **request, headers=ADMIN if case.admin else tenant
        )
        assert response.headers["content-type"] in (PROBLEM, "application/json"), response.text
        said = _messages(response, case)
        assert f"{case.loc}: " in said, (value, said)
        assert case.says in said, (value, said)
        assert not [sign for sign in REGEX_SIGNS if sign in said], (value, said)
    stored = ("events", "deliveries", "endpoints", "redrive_jobs", "reconcile_runs", "event_types")
    for table in stored:
        assert await count_rows(engine, table) == 0


@pytest.mark.parametrize(
    ("route", "request_template"),
    [
        ("POST /v1/endpoints", {"json": {"url": "http://127.0.0.1/", "event_types": [VALUE]}}),
        (UPDATE, {"json": {"event_types": [VALUE]}}),
        ("POST /v1/deliveries/redrive", {"json": {"event_type": VALUE}}),
        ("GET /v1/deliveries", {"params": {"event_type": VALUE}}),
    ],
)
@pytest.mark.parametrize("wildcard", ["order.created*", "*.paid", "order*", "order.*.paid", "**"])
async def test_a_wildcard_anywhere_but_a_whole_last_segment_is_refused(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    route: str,
    request_template: dict[str, Any],
    wildcard: str,
) -> None:
    method, path = route.split(" ")
    response = await client.request(
        method, path, **_fill(request_template, wildcard), headers=tenant
    )
    assert response.status_code == 422 and response.headers["content-type"] == PROBLEM
    assert SELECTOR in response.json()["detail"]


# Times that no Python or PostgreSQL code could work with once converted to UTC.
UNREPRESENTABLE = ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00")
TIME_CASES = [
    Case("DeliveryIntent.deliver_after", "POST /v1/deliveries",
         {"json": _delivery(deliver_after=VALUE)}, "body.deliver_after", UNREPRESENTABLE, ""),
    Case("EventIntent.deliver_after", "POST /v1/events",
         {"json": {"event_type": "a", "payload": {}, "deliver_after": VALUE}},
         "body.deliver_after", UNREPRESENTABLE, ""),
    Case("BatchItem.deliver_after", "POST /v1/deliveries/batch",
         {"json": {"items": [_delivery(deliver_after=VALUE)]}}, "deliver_after", UNREPRESENTABLE,
         ""),
    Case("RedriveFilter.dead_after", "POST /v1/deliveries/redrive",
         {"json": {"dead_after": VALUE}}, "body.dead_after", UNREPRESENTABLE, ""),
    Case("RedriveFilter.dead_before", "POST /v1/deliveries/redrive",
         {"json": {"dead_before": VALUE}}, "body.dead_before", UNREPRESENTABLE, ""),
]  # fmt: skip


def test_every_time_input_is_covered(app: FastAPI) -> None:
    assert datetime_inputs(app) == {case.field for case in TIME_CASES}


@pytest.mark.parametrize("case", TIME_CASES, ids=lambda case: case.field)
async def test_a_time_out_of_range_in_utc_is_422_up_front(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine, case: Case
) -> None:
    method, path = case.route.split(" ")
    for value in case.bad:
        response = await client.request(method, path, **_fill(case.request, value), headers=tenant)
        said = _messages(response, case)
        assert (
            f"{case.loc}: must lie between 0001-01-01 and 9999-12-31 once converted to UTC" in said
        )
    # Nothing was accepted to fail later: no redrive job, no delivery.
    for table in ("events", "deliveries", "redrive_jobs"):
        assert await count_rows(engine, table) == 0
