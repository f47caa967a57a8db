"""Ordered delivery through real `herald worker` processes to a receiver that
records the order each stream arrives in."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import httpx
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import new_endpoint
from tests.fixtures.processes import RECOVERY_ENV, herald_env, running_worker, running_workers
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.recovery import reconcile_until_succeeded
from tests.fixtures.stack import Stack
from tests.fixtures.streams import (
    accept_in_order,
    arrivals_by_stream,
    in_order,
    sequences,
    settled_states,
)
from tests.fixtures.waiting import count_rows, eventually


async def test_every_stream_arrives_in_sequence_through_retries_and_two_workers(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/ordered"), ordering="key")
    keys = [f"order-{k}" for k in range(6)]
    interleaved: list[str | None] = [keys[i % len(keys)] for i in range(len(keys) * 5)]
    # Failures spread over the first requests, whichever streams they fall on: 500s, and 429s
    # whose Retry-After pauses the whole destination.
    receiver.script(
        "/ordered",
        Reply(status=500),
        Reply(status=200),
        Reply(status=429, headers={"Retry-After": "1"}),
        Reply(status=500),
        Reply(status=200),
        Reply(status=500),
        Reply(status=500),
        Reply(status=429, headers={"Retry-After": "1"}),
    )
    accepted = await accept_in_order(client, tenant, endpoint["id"], interleaved)

    # The order Herald assigned is the producer's: 1, 2, 3 ... per key, in accept order.
    assigned: dict[str, list[int]] = defaultdict(list)
    for key, delivery in zip(interleaved, accepted, strict=True):
        assert delivery["ordering_key"] == key
        assigned[str(key)].append(delivery["stream_seq"])
    assert all(numbers == [1, 2, 3, 4, 5] for numbers in assigned.values())
    # Only each stream's head is scheduled; the rest wait unscheduled behind it.
    assert sum(d["next_attempt_at"] is not None for d in accepted) == len(keys)

    async with running_workers(stack, [tmp_path / "w1.log", tmp_path / "w2.log"]):
        await eventually(
            lambda: count_rows(engine, "deliveries", "state = 'succeeded'"),
            lambda n: n == len(accepted),
        )
    streams = arrivals_by_stream(receiver.on("/ordered"))
    assert set(streams) == set(keys)
    for numbers in streams.values():
        assert in_order(numbers), numbers
        assert sorted(set(numbers)) == [1, 2, 3, 4, 5]
    # The failures really happened, and were retried in place.
    assert len(receiver.on("/ordered")) == len(accepted) + 6


async def test_a_dead_head_halts_its_stream_until_an_operator_skips_it(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/halt"), ordering="endpoint")
    assert endpoint["on_dead"] == "halt"  # the default
    receiver.script("/halt", Reply(status=400))  # permanent: the head dies at once
    ids = [d["id"] for d in await accept_in_order(client, tenant, endpoint["id"], [None] * 3)]
    async with running_workers(stack, [tmp_path / "w.log"]):
        head, second, third = await settled_states(
            client, tenant, ids, ["dead", "pending", "pending"]
        )
        assert "halts its stream" in head["waiting_detail"]
        assert second["waiting_reason"] == "halted" and second["waiting_behind"] == ids[0]
        assert third["waiting_behind"] == ids[0]
        assert sequences(receiver, "/halt") == [1]  # nothing went past the dead head

        refused = await client.post(f"/v1/deliveries/{ids[1]}/skip", headers=tenant)
        assert refused.status_code == 409 and ids[0] in refused.json()["detail"]
        skipped = await client.post(f"/v1/deliveries/{ids[0]}/skip", headers=tenant)
        assert skipped.status_code == 200, skipped.text
        pages = await settled_states(client, tenant, ids, ["dead", "succeeded", "succeeded"])
    assert "skipped" in pages[0]["waiting_detail"]
    assert sequences(receiver, "/halt") == [1, 2, 3]


async def test_skip_moves_on_past_a_dead_head_by_itself(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(
        client, tenant, url=receiver.url("/skip"), ordering="endpoint", on_dead="skip"
    )
    receiver.script("/skip", Reply(status=400))
    ids = [d["id"] for d in await accept_in_order(client, tenant, endpoint["id"], [None] * 3)]
    async with running_workers(stack, [tmp_path / "w.log"]):
        pages = await settled_states(client, tenant, ids, ["dead", "succeeded", "succeeded"])
        assert "skipped" in pages[0]["waiting_detail"]
        assert sequences(receiver, "/skip") == [1, 2, 3]

        # A redrive of the earlier, dead one cannot jump ahead of what succeeded: it goes to
        # the stream's tail with a new number, under the same id.
        redriven = await client.post(f"/v1/deliveries/{ids[0]}/redrive", headers=tenant)
        assert redriven.status_code == 202, redriven.text
        assert redriven.json()["stream_seq"] == 4
        await settled_states(client, tenant, ids, ["succeeded"] * 3)
    assert sequences(receiver, "/skip") == [1, 2, 3, 4]
    assert receiver.on("/skip")[-1].headers["webhook-id"] == ids[0]


async def test_a_redriven_halted_head_is_retried_in_place(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/again"), ordering="endpoint")
    receiver.script("/again", Reply(status=400))
    ids = [d["id"] for d in await accept_in_order(client, tenant, endpoint["id"], [None] * 3)]
    async with running_workers(stack, [tmp_path / "w.log"]):
        await settled_states(client, tenant, ids, ["dead", "pending", "pending"])
        redriven = await client.post(f"/v1/deliveries/{ids[0]}/redrive", headers=tenant)
        assert redriven.status_code == 202, redriven.text
        assert redriven.json()["stream_seq"] == 1  # the halted head keeps its place
        await settled_states(client, tenant, ids, ["succeeded"] * 3)
    assert sequences(receiver, "/again") == [1, 1, 2, 3]


async def test_a_cancelled_delivery_leaves_a_gap_and_a_cancelled_head_hands_on(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/gap"), ordering="endpoint")
    answer = asyncio.Event()
    receiver.script("/gap", Reply(hold=answer))  # the head stays in flight until released
    ids = [d["id"] for d in await accept_in_order(client, tenant, endpoint["id"], [None] * 4)]
    async with running_workers(stack, [tmp_path / "w.log"]):
        await receiver.wait_for("/gap", 1)
        middle = await client.post(f"/v1/deliveries/{ids[1]}/cancel", headers=tenant)
        assert middle.status_code == 200, middle.text
        answer.set()
        await settled_states(
            client, tenant, ids, ["succeeded", "cancelled", "succeeded", "succeeded"]
        )
        assert sequences(receiver, "/gap") == [1, 3, 4]

        # A head that is not in flight hands the stream on at once.
        receiver.script("/gap", Reply(status=500), Reply(status=500), Reply(status=500))
        later = [d["id"] for d in await accept_in_order(client, tenant, endpoint["id"], [None] * 2)]
        await eventually(lambda: _count(receiver, "/gap"), lambda n: n >= 4)
        cancelled = await client.post(f"/v1/deliveries/{later[0]}/cancel", headers=tenant)
        assert cancelled.status_code == 200, cancelled.text
        receiver.unscript("/gap")
        await settled_states(client, tenant, later, ["cancelled", "succeeded"])
    numbers = sequences(receiver, "/gap")
    assert in_order(numbers) and numbers[-1] == 6 and 5 in numbers


async def _count(receiver: Receiver, path: str) -> int:
    return len(receiver.on(path))


async def test_a_worker_killed_mid_send_resends_only_the_head(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/kill"), ordering="endpoint")
    never = asyncio.Event()
    receiver.script("/kill", Reply(hold=never))  # the first request is never answered
    ids = [d["id"] for d in await accept_in_order(client, tenant, endpoint["id"], [None] * 3)]
    with running_worker(stack, tmp_path / "doomed.log", **RECOVERY_ENV) as doomed:
        await receiver.wait_for("/kill", 1)
        doomed.process.send_signal(signal.SIGKILL)
        doomed.process.wait()
    with running_worker(stack, tmp_path / "next.log", **RECOVERY_ENV):
        await reconcile_until_succeeded(client, engine, ids)
    never.set()
    # The head twice (same id, same number), never anything after it before it.
    assert sequences(receiver, "/kill") == [1, 1, 2, 3]
    assert len({r.headers["webhook-id"] for r in receiver.on("/kill")[:2]}) == 1


async def test_a_worker_stopped_past_its_lease_never_reorders_the_stream(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/stop"), ordering="endpoint")
    late = asyncio.Event()
    receiver.script("/stop", Reply(hold=late))
    ids = [d["id"] for d in await accept_in_order(client, tenant, endpoint["id"], [None] * 3)]
    with running_worker(stack, tmp_path / "stopped.log", **RECOVERY_ENV) as stopped:
        await receiver.wait_for("/stop", 1)
        stopped.process.send_signal(signal.SIGSTOP)
        try:
            # Another worker takes the head over once the lease ends, and the stream goes on.
            with running_worker(stack, tmp_path / "next.log", **RECOVERY_ENV):
                await reconcile_until_succeeded(client, engine, ids)
        finally:
            late.set()  # the frozen worker's request is answered at last
            stopped.process.send_signal(signal.SIGCONT)
        # Its record comes too late: fenced off by the token of the worker that took over.
        await asyncio.to_thread(stopped.wait_for_log, "delivery.lease_lost")
    assert sequences(receiver, "/stop") == [1, 1, 2, 3]


async def test_streams_are_rebuilt_from_postgres_after_flushall(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/flush"), ordering="key")
    keys: list[str | None] = [f"k{i % 3}" for i in range(12)]
    ids = [d["id"] for d in await accept_in_order(client, tenant, endpoint["id"], keys)]
    # Heads fail for a while, so the flush lands with streams half-way.
    receiver.script("/flush", *[Reply(status=503)] * 4)
    with running_worker(stack, tmp_path / "w.log", **RECOVERY_ENV):
        await eventually(lambda: _count(receiver, "/flush"), lambda n: n >= 5)
        redis = Redis.from_url(stack.redis_url)
        try:
            await redis.flushall()
        finally:
            await redis.aclose()
        await reconcile_until_succeeded(client, engine, ids)
    streams = arrivals_by_stream(receiver.on("/flush"))
    assert set(streams) == {"k0", "k1", "k2"}
    for numbers in streams.values():
        assert in_order(numbers) and sorted(set(numbers)) == [1, 2, 3, 4]


def herald_command(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        env=herald_env(stack),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


async def test_an_operator_finds_halted_streams_and_redrives_or_skips_from_the_command_line(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/cli"), ordering="key")
    receiver.script("/cli", Reply(status=400), Reply(status=400))
    keys: list[str | None] = ["a", "b", "a", "b"]
    ids = [d["id"] for d in await accept_in_order(client, tenant, endpoint["id"], keys)]
    async with running_workers(stack, [tmp_path / "w.log"]):
        await settled_states(client, tenant, ids, ["dead", "dead", "pending", "pending"])
        listed = await asyncio.to_thread(herald_command, stack, "streams", "halted")
        assert listed.returncode == 0, listed.stderr
        assert ids[0] in listed.stdout and ids[1] in listed.stdout and "1 waiting" in listed.stdout

        redriven = await asyncio.to_thread(herald_command, stack, "streams", "redrive", ids[0])
        assert redriven.returncode == 0 and "#1 in its stream" in redriven.stdout, redriven
        skipped = await asyncio.to_thread(herald_command, stack, "streams", "skip", ids[1])
        assert skipped.returncode == 0, skipped.stderr
        again = await asyncio.to_thread(herald_command, stack, "streams", "skip", ids[1])
        assert again.returncode == 1 and "does not halt its stream" in again.stderr
        await settled_states(client, tenant, ids, ["succeeded", "dead", "succeeded", "succeeded"])
    streams = arrivals_by_stream(receiver.on("/cli"))
    assert streams == {"a": [1, 1, 2], "b": [1, 2]}
