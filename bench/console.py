"""The console's pages over a million deliveries: how long one page takes to render,
beside the API's own listing of the same rows (GET /v1/deliveries) in the same run."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from statistics import median
from typing import Any

import aiohttp

from bench.load import Client
from bench.stack import ADMIN_KEY, API, Stack

RENDERS = 20  # each page this many times; the median is reported
DEAD_EVERY = 100  # one delivery in this many is dead, the rest succeeded


async def insert_history(stack: Stack, tenant_id: str, endpoints: list[str], count: int) -> None:
    """``count`` finished deliveries (events, one attempt each), over the last day."""
    connection = await stack.connect()
    spread = "now() - interval '1 day' + g * interval '1 day' / $2"  # $2: the count
    ids = "lpad(g::text, 25, '0')"  # ids the console accepts: 26 digits are a ULID's alphabet
    try:
        await connection.execute("TRUNCATE outbox_wakeups, attempts, deliveries, events CASCADE")
        await connection.execute(
            f"INSERT INTO events (id, tenant_id, event_type, payload, created_at) SELECT"
            f" 'evt_0' || {ids}, $1, 'order.paid', '\\x7b7d', {spread}"
            " FROM generate_series(1, $2) g",
            tenant_id,
            count,
        )
        await connection.execute(
            "INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type, region,"
            " state, attempt_count, next_attempt_at, last_outcome, last_status_code,"
            " dead_reason, created_at, updated_at, completed_at)"
            f" SELECT 'dlv_0' || {ids}, $1, ($3::text[])[1 + g % cardinality($3::text[])],"
            f" 'evt_0' || {ids}, 'order.paid', 'local',"
            f" CASE WHEN g % {DEAD_EVERY} = 0 THEN 'dead' ELSE 'succeeded' END, 1, {spread},"
            f" CASE WHEN g % {DEAD_EVERY} = 0 THEN 'permanent' ELSE 'success' END,"
            f" CASE WHEN g % {DEAD_EVERY} = 0 THEN 400 ELSE 200 END,"
            f" CASE WHEN g % {DEAD_EVERY} = 0 THEN 'permanent_failure: HTTP 400' END,"
            f" {spread}, {spread}, {spread} FROM generate_series(1, $2) g",
            tenant_id,
            count,
            endpoints,
        )
        await connection.execute(
            "INSERT INTO attempts (delivery_id, endpoint_id, attempt_number, started_at,"
            " duration_ms, status_code, outcome)"
            f" SELECT 'dlv_0' || {ids}, ($1::text[])[1 + g % cardinality($1::text[])], 1,"
            f" {spread}, 5 + g % 50, CASE WHEN g % {DEAD_EVERY} = 0 THEN 400 ELSE 200 END,"
            f" CASE WHEN g % {DEAD_EVERY} = 0 THEN 'permanent' ELSE 'success' END"
            " FROM generate_series(1, $2) g",
            endpoints,
            count,
        )
        # As autovacuum would have by now: statistics, and the BRIN index's ranges summarised.
        await connection.execute("VACUUM ANALYZE attempts, deliveries, events")
    finally:
        await connection.close()


async def _timed(http: aiohttp.ClientSession, url: str, **headers: str) -> float:
    """The median time of ``RENDERS`` GETs of ``url``, in milliseconds (each must answer 200)."""
    took = []
    for _ in range(RENDERS):
        started = time.perf_counter()
        async with http.get(url, headers=headers, allow_redirects=False) as response:
            await response.read()
            assert response.status == 200, (url, response.status)
        took.append(1000 * (time.perf_counter() - started))
    return median(took)


@asynccontextmanager
async def _signed_in(key: str) -> AsyncIterator[aiohttp.ClientSession]:
    """A browser's session: the sign-in form read (its token and cookie), then posted."""
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        async with http.get(f"{API}/console/sign-in") as form:
            token = re.search(r'name="form_token" value="([^"]+)"', await form.text())
        assert token is not None, "no form token on the sign-in page"
        sent = {"key": key, "form_token": token.group(1)}
        async with http.post(f"{API}/console/sign-in", data=sent) as signed_in:
            assert signed_in.status == 200, signed_in.status  # followed to the overview
        yield http


async def console_pages(client: Client, count: int) -> dict[str, Any]:
    endpoints = list(client.endpoints.values())
    await insert_history(client.stack, client.tenant_id, endpoints, count)
    key = client.tenant["Authorization"].removeprefix("Bearer ")
    middle = f"dlv_0{count // 2:025d}"
    dead = f"dlv_0{count // 2 // DEAD_EVERY * DEAD_EVERY:025d}"
    async with _signed_in(key) as http:
        pages = {
            "overview": "/console",
            "dead letters, first page": "/console/dead",
            "dead letters, a page deep in the history": f"/console/dead?before={dead}",
            "endpoints": "/console/endpoints",
            "one delivery": f"/console/deliveries/{middle}",
            "search by delivery id": f"/console/search?q={middle}",
        }
        rendered = {name: await _timed(http, API + path) for name, path in pages.items()}
        api = await _timed(http, f"{API}/v1/deliveries?limit=50", **client.tenant)
    async with _signed_in(ADMIN_KEY) as http:  # reconcile runs are an admin's
        rendered["reconcile runs"] = await _timed(http, f"{API}/console/reconcile")
    return {"deliveries": count, "renders": RENDERS, "pages_ms": rendered, "api_list_ms": api}
