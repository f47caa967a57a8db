"""A body Herald cannot read as JSON is answered in words: what is wrong, where as a person
counts, what to change -- on the hand-served accept route and on an ordinary FastAPI route
alike, and never with the body's own content echoed back."""

from __future__ import annotations

import sys
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.waiting import count_rows

PROBLEM = "application/problem+json"
JSON = {"Content-Type": "application/json"}
# The accept route resolves its parameters by hand (app/api/served.py); the endpoints route is
# FastAPI's own. Both must say the same.
ROUTES = ["/v1/deliveries", "/v1/endpoints"]

# One body for every complaint the JSON decoder makes, with what the client is told.
MISTAKES = [
    (
        '{"url": }',
        "line 1, column 9: expected a value (an object, array, string, number, true, false "
        "or null)",
    ),
    ("{url: 1}", "line 1, column 2: expected a property name in double quotes"),
    ('{"url": 1,}', "line 1, column 11: expected a property name in double quotes"),
    ('{"url" 1}', "line 1, column 8: expected ':' after the property name"),
    ('{\n  "url": 1\n  "b": 2\n}', "line 3, column 3: expected ',' or the closing } or ]"),
    (
        '{"url": "http://x',
        'line 1, column 9: a string starts here and is never closed with "',
    ),
    (
        '{"url": "a\tb"}',
        "line 1, column 11: a control character (a tab, a line break) inside a string: "
        "write it escaped, as \\t or \\n",
    ),
    (
        '{"url": "\\q"}',
        "line 1, column 10: a backslash in a string starts an escape: "
        '\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\u and four hexadecimal digits',
    ),
    (
        '{"url": "\\u12G4"}',
        "line 1, column 11: \\u in a string must be followed by four hexadecimal digits",
    ),
    (
        '{"url": 1} {"url": 2}',
        "line 1, column 12: more after the JSON value: the body must be a single JSON value",
    ),
]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(("body", "said"), MISTAKES, ids=[m[1][:40] for m in MISTAKES])
async def test_every_json_mistake_is_said_in_words_with_its_line_and_column(
    client: httpx.AsyncClient, tenant: dict[str, str], route: str, body: str, said: str
) -> None:
    response = await client.post(route, content=body, headers={**tenant, **JSON})
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert problem["type"].endswith("/malformed-json")
    assert problem["detail"] == f"the body is not valid JSON at {said}"
    assert " at at " not in problem["detail"]


def too_long(route: str, endpoint_id: str, digits: int) -> str:
    number = "7" * digits
    if route == "/v1/deliveries/batch":
        item = f'{{"endpoint_id": "{endpoint_id}", "event_type": "big.number", '
        return f'{{"items": [{item}"payload": {{"n": {number}}}}}]}}'
    head = f'"endpoint_id": "{endpoint_id}", ' if route == "/v1/deliveries" else ""
    return f'{{{head}"event_type": "big.number", "payload": {{"n": {number}}}}}'


@pytest.mark.parametrize("route", ["/v1/deliveries", "/v1/events", "/v1/deliveries/batch"])
async def test_a_number_longer_than_python_reads_is_422_saying_so(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    route: str,
) -> None:
    limit = sys.get_int_max_str_digits()
    response = await client.post(
        route, content=too_long(route, endpoint["id"], 5000), headers={**tenant, **JSON}
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    detail = response.json()["detail"]
    assert detail == (
        f"a number in the body has more than {limit} digits, more than Herald reads: "
        "send a number that long as a string"
    )
    assert "7777" not in response.text  # the payload is never echoed
    assert await count_rows(engine, "events") == 0


async def test_a_number_as_long_as_python_reads_is_accepted(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    body = too_long("/v1/deliveries", endpoint["id"], sys.get_int_max_str_digits())
    response = await client.post("/v1/deliveries", content=body, headers={**tenant, **JSON})
    assert response.status_code == 202, response.text
