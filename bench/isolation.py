"""No tenant can cost another anything: a quiet tenant's accept latency and accept-to-receipt,
alone and then beside each of another tenant's attacks, in the same run.

The quiet tenant is the bench's own (its endpoint on the instant receiver), posting one intent
at a time at a steady rate. The attacker is a tenant the operator has held to the limits an
operator hosting several tenants sets (accept_rate, delivery_rate), and attacks every shared
resource: 1,000-item batches on three connections; events fanning out to as many endpoints as one
customer may have, each with a regex filter; half-open connections from an address of its own.
Each figure is the quiet tenant's p50 and p95 with the attack, against the same alone measured
just before it, and each run with the attacker at its limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from app.flow.service.accept_rates import RATE_CACHE_SECONDS
from bench.load import RECEIVERS, Client
from bench.probes import CpuMeter
from bench.stack import ADMIN_KEY, API, percentile, progress

QUIET_RATE = 50  # intents a second
# What the operator allows the attacker, intents accepted and attempts started a second: a
# share this 2-core machine can give each of several tenants (it delivers ~900 a second in
# all) -- and, for the batches, a second run at more than half of the machine, to show what
# a tenant costs the others when the operator grants it that much.
SHARE = 100.0
MOST_OF_THE_MACHINE = 500.0
FILTER = 'payload.t.matches("(a|b)*a(a|b){20}c")'  # as costly a pattern as a filter may hold


async def _grant(client: Client, tenant_id: str, rate: float) -> None:
    """The operator sets the attacker's accept and delivery rates."""
    async with client.http.patch(
        f"{API}/v1/tenants/{tenant_id}/limits",
        json={"accept_rate": rate, "delivery_rate": rate},
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
    ) as answer:
        assert answer.status == 200, await answer.text()


class _Attacker:
    """The attacking tenant: its endpoints (as many as one customer may have, each with a
    costly filter), its attacks, and the statuses its requests were answered with."""

    def __init__(
        self, client: Client, tenant_id: str, tenant: dict[str, str], endpoint: str
    ) -> None:
        self.client = client
        self.tenant_id = tenant_id
        self.tenant = tenant  # its API key's Authorization header
        self.endpoint = endpoint
        self.answers: dict[int, int] = {}

    @classmethod
    async def made(cls, client: Client) -> _Attacker:
        admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
        async with client.http.post(
            f"{API}/v1/tenants", json={"name": "attacker"}, headers=admin
        ) as answer:
            body = await answer.json()
        tenant = {"Authorization": f"Bearer {body['api_key']}"}
        url = f"{RECEIVERS['instant'].url}/hook"
        async with client.http.put(f"{API}/v1/customers/victimised", json={}, headers=tenant):
            pass
        endpoint = ""
        for _ in range(100):  # as many as one customer may have
            spec = {"url": url, "customer_id": "victimised", "filter": FILTER}
            async with client.http.post(f"{API}/v1/endpoints", json=spec, headers=tenant) as answer:
                assert answer.status == 201, await answer.text()
                endpoint = (await answer.json())["id"]
        return cls(client, body["id"], tenant, endpoint)

    async def post(self, path: str, body: Any) -> None:
        async with self.client.http.post(f"{API}{path}", json=body, headers=self.tenant) as answer:
            self.answers[answer.status] = self.answers.get(answer.status, 0) + 1
            await answer.read()
            if answer.status == 429:
                await asyncio.sleep(float(answer.headers.get("Retry-After", "1")))

    async def batches(self) -> None:
        items = [
            {"endpoint_id": self.endpoint, "event_type": "bench", "payload": {"t": "ab" * 100}}
            for _ in range(1000)
        ]
        while True:
            await self.post("/v1/deliveries/batch", {"items": items})

    async def fanned_events(self) -> None:
        event = {"event_type": "bench", "customer_id": "victimised", "payload": {"t": "ab" * 500}}
        while True:
            await self.post("/v1/events", event)


async def _half_open() -> None:
    """Connections that send part of a request line and nothing more, from 127.0.0.2."""
    held: list[socket.socket] = []
    try:
        while True:
            for _ in range(20):
                with contextlib.suppress(OSError):
                    sock = socket.socket()
                    sock.setblocking(False)
                    sock.bind(("127.0.0.2", 0))
                    with contextlib.suppress(BlockingIOError):
                        sock.connect(("127.0.0.1", int(API.rsplit(":", 1)[1])))
                    held.append(sock)
            await asyncio.sleep(0.1)
            for sock in held[-20:]:
                with contextlib.suppress(OSError):
                    sock.send(b"GET /v1/deliver")
            if len(held) > 1000:
                for sock in held[:200]:
                    sock.close()
                del held[:200]
    finally:
        for sock in held:
            sock.close()


async def _quiet(client: Client, seconds: float) -> dict[str, float]:
    """The quiet tenant's figures over ``seconds`` at QUIET_RATE."""
    await client.reset_receiver("instant")
    body = {"endpoint_id": client.endpoints["instant"], "event_type": "bench", "payload": {}}
    sent: dict[str, float] = {}
    accepts: list[float] = []
    refused = 0

    async def one() -> None:
        nonlocal refused
        at, started = time.time(), time.perf_counter()
        async with client.http.post(
            f"{API}/v1/deliveries", json=body, headers=client.tenant
        ) as answer:
            accepts.append(time.perf_counter() - started)
            if answer.status != 202:
                refused += 1
                return
            sent[(await answer.json())["id"]] = at

    tasks, start = [], time.perf_counter()
    for n in range(int(QUIET_RATE * seconds)):
        delay = start + n / QUIET_RATE - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one()))
    await asyncio.gather(*tasks)
    arrivals: dict[str, float] = {}
    deadline = time.perf_counter() + 60
    while time.perf_counter() < deadline:
        arrivals = await client.arrivals("instant")
        if all(d in arrivals for d in sent):
            break
        await asyncio.sleep(0.2)
    receipts = [arrivals[d] - at for d, at in sent.items() if d in arrivals]
    return {
        "accept_p50_ms": percentile(accepts, 0.5) * 1000,
        "accept_p95_ms": percentile(accepts, 0.95) * 1000,
        "receipt_p50_ms": percentile(receipts, 0.5) * 1000,
        "receipt_p95_ms": percentile(receipts, 0.95) * 1000,
        "refused": refused,
        "lost": len(sent) - len(receipts),
    }


async def _metered(
    client: Client, measuring: Coroutine[Any, Any, dict[str, float]]
) -> dict[str, float]:
    """The measure, with the CPU the API and the workers used meanwhile (% of one core)."""
    api = CpuMeter(client.stack.api_processes())
    workers = CpuMeter(client.stack.worker_processes())
    figures = await measuring
    return {**figures, "api_cpu_percent": api.percent(), "worker_cpu_percent": workers.percent()}


@contextlib.asynccontextmanager
async def _running(
    attack: Callable[[], Coroutine[Any, Any, None]], copies: int
) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(attack()) for _ in range(copies)]
    try:
        await asyncio.sleep(1.0)  # under way before the quiet tenant is measured
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def measure(client: Client, seconds: float) -> dict[str, Any]:
    attacker = await _Attacker.made(client)
    await client.stack.clean_slate()
    client.stack.start_workers()
    await client.stack.wait_workers_idle()
    progress("isolation: warming up")
    await _quiet(client, 2)
    results: dict[str, Any] = {}
    granted = 0.0
    for name, attack, copies, rate in (
        ("batches", attacker.batches, 3, SHARE),
        ("fanned_events", attacker.fanned_events, 1, SHARE),
        ("half_open", _half_open, 1, SHARE),
        ("batches_most_of_the_machine", attacker.batches, 3, MOST_OF_THE_MACHINE),
    ):
        if rate != granted:
            await _grant(client, attacker.tenant_id, rate)
            granted = rate
            await asyncio.sleep(RATE_CACHE_SECONDS + 1)  # every process has read it
        progress(f"isolation: the quiet tenant alone, then beside {name} (at {rate:g}/s)")
        results[name] = await _alone_then_beside(client, seconds, attacker, attack, copies)
        results[name]["attacker_rate"] = rate
        await client.stack.clean_slate()
    client.stack.stop_workers()
    results["event_types"] = await _many_types(client)
    await client.stack.clean_slate()
    return results


async def _alone_then_beside(
    client: Client,
    seconds: float,
    attacker: _Attacker,
    attack: Callable[[], Coroutine[Any, Any, None]],
    copies: int,
) -> dict[str, Any]:
    """The quiet tenant's figures beside ``copies`` of ``attack``, against a measure of it
    alone just before: what drifts on the machine drifts for both."""
    alone = await _metered(client, _quiet(client, seconds))
    attacker.answers.clear()
    async with _running(attack, copies):
        beside: dict[str, Any] = await _metered(client, _quiet(client, seconds))
    beside["attacker_answers"] = {str(status): n for status, n in sorted(attacker.answers.items())}
    beside["alone"] = alone
    beside["accept_p95_ratio"] = beside["accept_p95_ms"] / alone["accept_p95_ms"]
    beside["receipt_p50_ratio"] = beside["receipt_p50_ms"] / alone["receipt_p50_ms"]
    return beside


async def _many_types(client: Client) -> dict[str, float]:
    """A batch of 1,000 intents of 1,000 event types beside one of a single type (3.7 s against
    0.28 s when each type was a catalogue read of its own): the median of 3."""
    endpoint = client.endpoints["instant"]

    async def timed(types: int, round_: int) -> float:
        items = [
            {"endpoint_id": endpoint, "event_type": f"t{round_}.{n % types}", "payload": {}}
            for n in range(1000)
        ]
        started = time.perf_counter()
        await client.post("/v1/deliveries/batch", {"items": items})
        return time.perf_counter() - started

    one, many = [], []
    for round_ in range(3):
        one.append(await timed(1, round_))
        many.append(await timed(1000, round_))
    one.sort()
    many.sort()
    return {"one_type_ms": one[1] * 1000, "many_types_ms": many[1] * 1000}
