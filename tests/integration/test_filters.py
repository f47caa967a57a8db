"""Endpoint filters in CEL: checked when saved (a 422 says where), evaluated at fan-out; an
event a filter says no to makes no delivery for that endpoint, and the event says why."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import new_endpoint
from tests.fixtures.waiting import count_rows

BIG_EUROS = 'payload.amount > 100 && payload.currency == "EUR"'


# An attack on the API's loop: three loops over one list, cubic in its length (7.6 s for 250
# elements, unbounded). Its raw-string disguise is read by CEL's own parser, never a regex.
CUBIC = "payload.a.all(type, payload.a.all(type, payload.a.all(type, true)))"
NESTED_OVER_PAYLOAD = "each turn may cost only what its own element does"


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("payload.amount >", "at line 1, column 17: the expression ends too early"),
        ("payload.amount > 100 &&& x", "at line 1, column 24"),
        ("paylod.amount > 100", "unknown name paylod: a filter sees type and payload"),
        ("payload.a == 1 || " * 60 + "true", "a filter is at most 1,000 characters"),
        (CUBIC, NESTED_OVER_PAYLOAD),
        # The attack as written: CEL's parser finds no raw string there, so nothing hides...
        ('r"\\" == "" || ' + CUBIC + ' || "" == ""', "at line 1, column 1: Invalid string"),
        # ... and a raw string it does take hides nothing from the AST either.
        ('r"\\\\" == "" || ' + CUBIC + ' || "" == ""', NESTED_OVER_PAYLOAD),
        ("r'\\\\' == '' || '''\\\"''' == '' || " + CUBIC, NESTED_OVER_PAYLOAD),
        # A comment hides nothing from the AST.
        ("payload.a.//c\nall(x, payload.a.//c\nall(y, true))", NESTED_OVER_PAYLOAD),
        # One walk of the payload per element would be quadratic.
        ("payload.a.all(x, x in payload.a)", NESTED_OVER_PAYLOAD),
        ("payload.a.exists(x, x.b.exists(y, x in y))", NESTED_OVER_PAYLOAD),
        # CEL builds map's and filter's lists by appending: quadratic in the runtime.
        ("payload.a.map(x, x * 2).size() > 0", "map and filter build a list"),
        ("payload.a.filter(x, x > 1).size() > 2", "map and filter build a list"),
        ("payload.s.contains(payload.t)", "one of them must be a literal"),
        ("payload.s.matches(payload.pattern)", "a matches() pattern must be a literal string"),
        ('"abc".matches(type)', "a matches() pattern must be a literal string"),
        # A pattern is compiled when saved: one RE2 cannot build is refused then, in words...
        ('type.matches("(a")', "the pattern is not a regular expression RE2 reads (missing ))"),
        (r'payload.t.matches("[\\p{L}\\p{N}]{1000}")', "more RE2 instructions than a pattern may"),
        # ... and its search is priced by the program RE2 made of it, not by its text: these
        # 16 characters are 80,524 instructions, 68 ms a call when rebuilt per event.
        (r'payload.t.matches("[\\p{L}\\p{N}]{60}")', "more RE2 instructions than a pattern may"),
        (r'type.matches("\\pL\\pL")', "compiles to 2,396 RE2 instructions"),
        (r'payload.t.matches("\\pL")', "could take 19,660,924 steps on a 2,048-byte event"),
        # Type-checked when saved: a number is no verdict.
        ("payload.amount + 1", "a filter must be true or false; this one gives int"),
        ('"order." + type', "a filter must be true or false; this one gives string"),
        ("", "at least 1 character"),
    ],
)
async def test_a_filter_that_cannot_run_is_refused_where_it_is_wrong(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    engine: AsyncEngine,
    endpoint: dict[str, Any],
    expression: str,
    says: str,
) -> None:
    created = await client.post(
        "/v1/endpoints", json={"url": "http://127.0.0.1:9/x", "filter": expression}, headers=tenant
    )
    updated = await client.patch(
        f"/v1/endpoints/{endpoint['id']}", json={"filter": expression}, headers=tenant
    )
    for response in (created, updated):
        assert response.status_code == 422, response.text
        assert response.headers["content-type"] == "application/problem+json"
        detail = response.json()["detail"]
        assert detail.startswith("body.filter: ") and says in detail, detail
    assert await count_rows(engine, "endpoints") == 1  # only the fixture's
    assert (await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)).json()[
        "filter"
    ] is None


async def test_an_event_reaches_only_the_endpoints_whose_filter_says_yes(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    big = await new_endpoint(client, tenant, filter=BIG_EUROS)
    orders = await new_endpoint(client, tenant, filter='type.startsWith("order.")')
    everything = await new_endpoint(client, tenant)
    assert big["filter"] == BIG_EUROS
    names = {big["id"]: "big", orders["id"]: "orders", everything["id"]: "everything"}

    async def publish(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
        response = await client.post(
            "/v1/events", json={"event_type": event_type, "payload": payload}, headers=tenant
        )
        assert response.status_code == 202, response.text
        body: dict[str, Any] = response.json()
        return body

    rich = await publish("order.paid", {"amount": 150, "currency": "EUR"})
    assert {names[d["endpoint_id"]] for d in rich["deliveries"]} == {"big", "orders", "everything"}
    assert rich["filtered_out"] == []

    small = await publish("invoice.paid", {"amount": 50, "currency": "EUR"})
    assert {names[d["endpoint_id"]] for d in small["deliveries"]} == {"everything"}
    assert {(names[f["endpoint_id"]], f["reason"]) for f in small["filtered_out"]} == {
        ("big", "the filter said false"),
        ("orders", "the filter said false"),
    }
    assert await count_rows(engine, "deliveries", "event_id = :e", e=small["id"]) == 1

    # A field the filter needs is missing: the filter fails, so it lets nothing through.
    missing = await publish("order.paid", {"currency": "EUR"})
    assert {names[d["endpoint_id"]] for d in missing["deliveries"]} == {"orders", "everything"}
    [failed] = missing["filtered_out"]
    assert (names[failed["endpoint_id"]], failed["reason"]) == (
        "big",
        "the filter failed on this event: no field amount",
    )

    # The event tells it again when read back.
    read = (await client.get(f"/v1/events/{small['id']}", headers=tenant)).json()
    assert read["filtered_out"] == small["filtered_out"]


async def test_a_replayed_publish_answers_the_same_filtered_out(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    await new_endpoint(client, tenant, filter=BIG_EUROS)
    keyed = {**tenant, "Idempotency-Key": "publish-once"}
    body = {"event_type": "x", "payload": {"amount": 1, "currency": "EUR"}}
    first = await client.post("/v1/events", json=body, headers=keyed)
    again = await client.post("/v1/events", json=body, headers=keyed)
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json()["filtered_out"] == first.json()["filtered_out"] != []


async def test_removing_a_filter_lets_everything_through_again(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    endpoint = await new_endpoint(client, tenant, filter="false")
    body = {"event_type": "x", "payload": {}}
    before = (await client.post("/v1/events", json=body, headers=tenant)).json()
    cleared = await client.patch(
        f"/v1/endpoints/{endpoint['id']}", json={"filter": None}, headers=tenant
    )
    assert cleared.json()["filter"] is None
    after = (await client.post("/v1/events", json=body, headers=tenant)).json()
    assert (len(before["deliveries"]), len(after["deliveries"])) == (0, 1)


async def test_strings_comments_and_loops_that_cost_little_are_fine(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    # "//" and ".all(" inside string literals are text; a comment is a comment; two loops, or
    # one inside another over a part of its element, cost one walk of the payload each.
    expression = (
        'payload.url.startsWith("https://") && payload.note != "a.all(x, y)" // why\n'
        "&& payload.lines.exists(l, l.qty > 1) && payload.lines.all(l, l.tags.all(t, t != 0))"
    )
    endpoint = await new_endpoint(client, tenant, filter=expression)
    lines = [{"qty": 2, "tags": [1, 2]}, {"qty": 1, "tags": []}]
    body = {"event_type": "x", "payload": {"url": "https://a.example", "note": "n", "lines": lines}}
    published = (await client.post("/v1/events", json=body, headers=tenant)).json()
    assert [d["endpoint_id"] for d in published["deliveries"]] == [endpoint["id"]]


LOOP = "payload.a.exists(x, x == 7)"


def budget_refusals(program: str) -> float:
    labels = {"program": program}
    return REGISTRY.get_sample_value("herald_program_budget_exceeded_total", labels) or 0.0


async def test_a_filter_over_its_budget_on_an_event_is_not_run_and_the_event_says_so(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    # Its bound grows with the list it loops over: a short list runs, a long one is not run
    # at all -- before any of its work is done -- and the endpoint is passed by with why.
    looping = await new_endpoint(client, tenant, filter=LOOP)
    before = budget_refusals("filter")

    async def publish(length: int) -> dict[str, Any]:
        body = {"event_type": "x", "payload": {"a": [0] * (length - 1) + [7]}}
        response = await client.post("/v1/events", json=body, headers=tenant)
        assert response.status_code == 202, response.text
        answer: dict[str, Any] = response.json()
        return answer

    short = await publish(10)
    assert [d["endpoint_id"] for d in short["deliveries"]] == [looping["id"]]
    long = await publish(50_000)
    assert long["deliveries"] == []
    [passed] = long["filtered_out"]
    assert passed["endpoint_id"] == looping["id"]
    assert passed["reason"].startswith("the filter was not run: it could take ")
    assert passed["reason"].endswith("steps on this event, over its budget")
    assert budget_refusals("filter") == before + 1


async def test_an_events_filters_share_one_budget(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    # Each filter alone is within its budget; together they are not: the endpoints past the
    # event's budget are passed by, and saying so costs nothing more.
    ids = [(await new_endpoint(client, tenant, filter=LOOP))["id"] for _ in range(12)]
    body = {"event_type": "x", "payload": {"a": [0] * 5_000 + [7]}}
    published = (await client.post("/v1/events", json=body, headers=tenant)).json()
    delivered = {d["endpoint_id"] for d in published["deliveries"]}
    passed = {f["endpoint_id"]: f["reason"] for f in published["filtered_out"]}
    assert delivered and passed and delivered | set(passed) == set(ids)
    assert all(r.endswith("over this event's filters' budget") for r in passed.values()), passed


async def test_an_event_too_large_to_make_cels_runs_only_the_filters_that_read_no_payload(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    # CEL's runtime takes the whole payload the first time a filter reads it, whatever the
    # filter reads: that is the event's cost, charged once, and for a payload this large it is
    # over the event's budget. A filter on the type alone needs none of it.
    on_payload = await new_endpoint(client, tenant, filter="payload.amount > 100")
    on_type = await new_endpoint(client, tenant, filter='type.startsWith("order.")')
    body = {"event_type": "order.paid", "payload": {"amount": 150, "pad": "x" * 200_000}}
    published = (await client.post("/v1/events", json=body, headers=tenant)).json()
    assert [d["endpoint_id"] for d in published["deliveries"]] == [on_type["id"]]
    [passed] = published["filtered_out"]
    assert passed["endpoint_id"] == on_payload["id"]
    assert passed["reason"].startswith("the filter was not run: making this event's 200,"), passed[
        "reason"
    ]
    # The same filter on a small event runs.
    small = {"event_type": "order.paid", "payload": {"amount": 150}}
    published = (await client.post("/v1/events", json=small, headers=tenant)).json()
    assert {d["endpoint_id"] for d in published["deliveries"]} == {on_payload["id"], on_type["id"]}
