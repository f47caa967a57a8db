"""The load a user puts on Herald: accept, batch accept, end to end, and accept-to-receipt
latency at a steady rate. (What each is measured against in the same run: baselines.py.)"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import aiohttp
import psutil

from bench import probes
from bench.stack import ADMIN_KEY, API, Stack, paced, percentile, python


class Receiver:
    """One bench/receiver.py process and the endpoint(s) that point at it."""

    def __init__(self, name: str, port: int, *args: str, max_in_flight: int) -> None:
        self.name, self.port, self.args, self.max_in_flight = name, port, args, max_in_flight
        self.url = f"http://127.0.0.1:{port}"

    def spawn(self, stack: Stack) -> None:
        stack.spawn(
            f"receiver-{self.name}", python("bench/receiver.py", str(self.port), *self.args)
        )


RECEIVERS = {
    r.name: r
    for r in (
        Receiver("instant", 8942, max_in_flight=1000),
        # 200 in flight, as many as the raw loop it is measured against keeps.
        Receiver("slow", 8943, "0.05", max_in_flight=200),
        # One slot, and a receiver that holds it for 2 s: is the slot ever idle?
        Receiver("slot", 8944, "2", max_in_flight=1),
        # Pauses its destination for an hour, as a receiver under pressure would.
        Receiver(
            "throttling", 8945, "--status", "429", "--retry-after", "3600", max_in_flight=1000
        ),
        # Refuses every request for good (400): the head of an ordered stream dies and halts it.
        Receiver("refusing", 8946, "--status", "400", max_in_flight=1000),
    )
}


def intents_for(endpoint_id: str, total: int) -> list[dict[str, Any]]:
    return [
        {"endpoint_id": endpoint_id, "event_type": "bench", "payload": {"n": n}}
        for n in range(total)
    ]


class Client:
    """A tenant of the running Herald, with one endpoint per receiver."""

    def __init__(self, stack: Stack, http: aiohttp.ClientSession) -> None:
        self.stack = stack
        self.http = http
        self.tenant: dict[str, str] = {}
        self.tenant_id = ""
        self.endpoints: dict[str, str] = {}
        self.endpoints_spread: list[str] = []  # many destinations, for reconcile

    async def setup(self) -> None:
        admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
        async with self.http.post(f"{API}/v1/tenants", json={"name": "bench"}, headers=admin) as r:
            body = await r.json()
        self.tenant = {"Authorization": f"Bearer {body['api_key']}"}
        self.tenant_id = str(await self.stack.sql("SELECT id FROM tenants WHERE name = 'bench'"))
        for receiver in RECEIVERS.values():
            self.endpoints[receiver.name] = await self.create_endpoint(receiver)

    async def create_endpoint(self, receiver: Receiver, **fields: str) -> str:
        body = {"url": f"{receiver.url}/hook", "max_in_flight": receiver.max_in_flight, **fields}
        async with self.http.post(f"{API}/v1/endpoints", json=body, headers=self.tenant) as r:
            assert r.status == 201, await r.text()
            return str((await r.json())["id"])

    async def post(self, path: str, body: Any, **headers: str) -> Any:
        async with self.http.post(
            f"{API}{path}", json=body, headers={**self.tenant, **headers}
        ) as response:
            assert response.status < 300, await response.text()
            return await response.json()

    async def get(self, path: str) -> Any:
        async with self.http.get(f"{API}{path}", headers=self.tenant) as response:
            return await response.json()

    async def accept_batches(self, endpoint: str, total: int) -> None:
        """``total`` intents for one endpoint, in batches of up to 1000."""
        await self.accept_items(intents_for(self.endpoints[endpoint], total))

    async def accept_items(self, items: list[dict[str, Any]]) -> None:
        """The intents, in order, in batches of up to 1000."""
        for start in range(0, len(items), 1000):
            await self.post("/v1/deliveries/batch", {"items": items[start : start + 1000]})

    async def receiver_stats(self, name: str) -> dict[str, Any]:
        async with self.http.get(f"{RECEIVERS[name].url}/stats") as response:
            stats: dict[str, Any] = await response.json()
            return stats

    async def reset_receiver(self, name: str) -> None:
        async with self.http.post(f"{RECEIVERS[name].url}/reset") as response:
            await response.read()

    async def wait_received(self, name: str, total: int, *, limit: float = 600) -> dict[str, Any]:
        """Poll the receiver until it has seen ``total`` requests; its stats then."""
        started = time.perf_counter()
        while (stats := await self.receiver_stats(name))["received"] < total:
            if time.perf_counter() - started > limit:
                raise RuntimeError(f"{name}: {stats['received']} of {total} in {limit:.0f} s")
            await asyncio.sleep(0.1)
        return stats

    async def wait_answered(self, name: str) -> dict[str, Any]:
        """Until every request the receiver has seen is answered; its stats then."""
        while (stats := await self.receiver_stats(name))["answered"] < stats["received"]:
            await asyncio.sleep(0.05)
        return stats

    # -- accept, one intent per request, against pgbench of the same transaction ---------

    async def accept(
        self,
        clients: int,
        seconds: float,
        *,
        keyed: bool,
        base: str = API,
        serving: list[psutil.Process] | None = None,
    ) -> dict[str, Any]:
        """``clients`` posting one intent at a time; ``keyed``: each with an Idempotency-Key
        of its own, as Herald's client sends them. ``base``: the server posted to (Herald's
        API, or the bare baseline); the CPU of ``serving`` (Herald's API processes by
        default) per accept is reported."""
        latencies: list[float] = []
        answers: dict[int, int] = {}
        body = {
            "endpoint_id": self.endpoints["instant"],
            "event_type": "bench",
            "payload": {"n": 1},
        }
        deadline = time.perf_counter() + seconds

        async def client() -> None:
            while time.perf_counter() < deadline:
                headers = (
                    {**self.tenant, "Idempotency-Key": uuid.uuid4().hex} if keyed else self.tenant
                )
                started = time.perf_counter()
                async with self.http.post(
                    f"{base}/v1/deliveries", json=body, headers=headers
                ) as response:
                    await response.read()
                answers[response.status] = answers.get(response.status, 0) + 1
                if response.status != 202:
                    continue
                latencies.append(time.perf_counter() - started)

        cpu = probes.CpuMeter(self.stack.api_processes() if serving is None else serving)
        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        elapsed = time.perf_counter() - started
        cpu_seconds = cpu.seconds()
        # Anything but 202 is a defect the figure must show, not a rate to hide it in.
        others = {status: n for status, n in answers.items() if status != 202}
        if others:
            raise RuntimeError(f"accept answered other than 202: {others}")
        return {
            "per_second": len(latencies) / elapsed,
            "p50_ms": percentile(latencies, 0.5) * 1000,
            "p99_ms": percentile(latencies, 0.99) * 1000,
            "cpu_ms_per_accept": 1000 * cpu_seconds / max(len(latencies), 1),
        }

    # -- batch ----------------------------------------------------------------------------

    async def batch(self, clients: int, batches: int) -> float:
        items = [
            {"endpoint_id": self.endpoints["instant"], "event_type": "bench", "payload": {"n": n}}
            for n in range(1000)
        ]
        done = 0

        async def client(count: int) -> None:
            nonlocal done
            for _ in range(count):
                # Not `done += await ...`: that reads `done` before the await and loses the
                # other clients' counts made meanwhile.
                body = await self.post("/v1/deliveries/batch", {"items": items})
                done += body["accepted"]

        started = time.perf_counter()
        await asyncio.gather(*(client(batches // clients) for _ in range(clients)))
        return done / (time.perf_counter() - started)

    # -- end to end against a raw aiohttp loop --------------------------------------------

    async def end_to_end(
        self, receiver: str, total: int, items: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Accept ``total`` intents (``items``, or plain ones to the receiver's endpoint) with
        no worker running, then start the workers and time them until the receiver has seen
        every one. Also: the rate from the receiver's first request to its last answer (worker
        start-up left out), the most it saw at once, and how the engine batched its work."""
        self.stack.stop_workers()
        await self.stack.clean_slate()
        await self.reset_receiver(receiver)
        await self.accept_items(items or intents_for(self.endpoints[receiver], total))
        started = time.perf_counter()
        self.stack.start_workers()
        # The workers' CPU from the first request on: their start-up is not an attempt's.
        while not (first := await self.receiver_stats(receiver))["received"]:
            await asyncio.sleep(0.005)
        servers = self.stack.server_processes()
        meters = {
            "workers": probes.CpuMeter(self.stack.worker_processes()),
            "postgres": probes.CpuMeter(servers["postgres"]),
            "redis": probes.CpuMeter(servers["redis"]),
            "receiver": probes.CpuMeter(self.stack.receiver_processes(receiver)),
        }
        await self.wait_received(receiver, total)
        elapsed = time.perf_counter() - started
        stats = await self.wait_answered(receiver)
        sent = max(total - first["received"], 1)
        cpu_ms = {role: 1000 * meter.seconds() / sent for role, meter in meters.items()}
        counters = await probes.engine_counters(self.stack)
        span = stats["last_end"] - stats["first_start"]
        return {
            "per_second": total / elapsed,
            "steady_per_second": total / span,
            "max_in_flight_seen": stats["max_concurrent"],
            # Σ request time / span: how many the receiver was answering at once, on average.
            "mean_in_flight_seen": stats["busy_seconds"] / span,
            "rows_per_claim": counters["claimed_rows"] / max(counters["claims"], 1),
            "outcomes_per_flush": counters["attempts"] / max(counters["record_flushes"], 1),
            "worker_cpu_ms_per_attempt": cpu_ms["workers"],
            # Where a delivery's CPU goes, process by process (the machine's cores are shared).
            "cpu_ms_per_delivery": cpu_ms,
            "engine_counters": counters,
        }

    async def arrivals(self, receiver: str) -> dict[str, float]:
        """When each delivery (by webhook-id) first reached the receiver (Unix time)."""
        async with self.http.get(f"{RECEIVERS[receiver].url}/arrivals") as response:
            arrivals: dict[str, float] = await response.json()
            return arrivals

    async def accept_while_delivering(self, total: int, clients: int) -> float:
        """Deliveries a second, from the first POST to the receiver's last arrival: ``clients``
        post one intent a request while the workers (already running) deliver."""
        await self.reset_receiver("instant")
        body = {"endpoint_id": self.endpoints["instant"], "event_type": "bench", "payload": {}}
        numbers = iter(range(total))

        async def client() -> None:
            for _ in numbers:
                async with self.http.post(
                    f"{API}/v1/deliveries", json=body, headers=self.tenant
                ) as response:
                    await response.read()
                    assert response.status == 202, response.status

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        await self.wait_received("instant", total)
        return total / (time.perf_counter() - started)

    # -- latency at a steady rate --------------------------------------------------------

    async def latency(self, rate: float, seconds: float) -> dict[str, Any]:
        await self.reset_receiver("instant")
        sent: dict[str, float] = {}
        body = {"endpoint_id": self.endpoints["instant"], "event_type": "bench", "payload": {}}

        async def one(n: int) -> None:
            at = time.time()
            sent[(await self.post("/v1/deliveries", body))["id"]] = at

        await paced(rate, seconds, one)
        arrivals: dict[str, float] = {}
        deadline = time.perf_counter() + 30
        while time.perf_counter() < deadline:
            arrivals = await self.arrivals("instant")
            if all(d in arrivals for d in sent):
                break
            await asyncio.sleep(0.2)
        waits = [(arrivals[d] - at) for d, at in sent.items() if d in arrivals]
        return {
            "p50_ms": percentile(waits, 0.5) * 1000,
            "p99_ms": percentile(waits, 0.99) * 1000,
            "stages": await self._stages(sent, arrivals),
        }

    async def _stages(
        self, sent: dict[str, float], arrivals: dict[str, float]
    ) -> dict[str, dict[str, float]]:
        """Where the time went, stage by stage, at p50 and p99 (one machine: one clock): the
        accept (sent to committed), the wake-up (committed to the worker starting its
        request: publish, take, grant, claim) and the send (start to the receiver)."""
        connection = await self.stack.connect()
        try:
            rows = await connection.fetch(
                "SELECT d.id, extract(epoch FROM d.created_at) AS committed,"
                " extract(epoch FROM a.started_at) AS started"
                " FROM deliveries d JOIN attempts a ON a.delivery_id = d.id"
                " WHERE d.id = ANY($1::text[])",
                list(sent),
            )
        finally:
            await connection.close()
        spans: dict[str, list[float]] = {"accept": [], "wake-up": [], "send": []}
        for row in rows:
            if row["id"] not in arrivals:
                continue
            committed, started = float(row["committed"]), float(row["started"])
            spans["accept"].append(committed - sent[row["id"]])
            spans["wake-up"].append(started - committed)
            spans["send"].append(arrivals[row["id"]] - started)
        return {
            stage: {"p50_ms": percentile(v, 0.5) * 1000, "p99_ms": percentile(v, 0.99) * 1000}
            for stage, v in spans.items()
            if v
        }
