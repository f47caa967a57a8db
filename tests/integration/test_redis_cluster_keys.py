"""The flow gate's and the wake-ups' scripts on a real Redis Cluster of three masters: every
script's keys share one slot (no CROSSSLOT refusal), a destination's ceiling holds there, and a
thousand destinations' keys spread over the masters instead of sitting on one."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, cast

import pytest
from redis.asyncio import RedisCluster
from redis.crc import key_slot

from app.core.ids import new_id
from app.core.redis_clients import create_cluster
from app.flow.service import gate_scripts, wakeup_scripts
from app.flow.service.gate_scripts import flow_keys
from app.flow.service.wakeups import Arm, Wakeups
from devstack.redis_cluster import TcpRedisCluster

REGION = "local"
WAKE = f"herald:wake:{{{REGION}}}"
LEASE_MS = 60_000


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[RedisCluster]:
    servers = TcpRedisCluster(tmp_path / "cluster")
    try:
        await asyncio.to_thread(servers.start)
        client = RedisCluster.from_url(servers.url, decode_responses=True)
        try:
            yield client
        finally:
            await client.aclose()
    finally:
        await asyncio.to_thread(servers.close)


async def run(cluster: RedisCluster, script: str, keys: list[str], *args: object) -> Any:
    """The script as Herald's code runs it, EVAL'd through the cluster client: it goes to the
    node holding its keys' slot, and is refused (CROSSSLOT) if they are not in one."""
    return await cast(
        "Awaitable[Any]", cluster.eval(script, len(keys), *keys, *(str(a) for a in args))
    )


async def grant(cluster: RedisCluster, endpoint_id: str, *, max_in_flight: int) -> int:
    """One start wanted of the destination, no start rate: 1 when granted, 0 when refused."""
    args = (0, max_in_flight, uuid.uuid4().hex, LEASE_MS, 0, 1, 1_000_000, "test/tenant")
    count, *_ = await run(cluster, gate_scripts.GRANT, list(flow_keys(endpoint_id)), *args)
    return int(count)


def test_a_destinations_keys_share_a_slot_and_destinations_spread() -> None:
    slots = set()
    for _ in range(1_000):
        endpoint_id = new_id("ep")
        assert len({key_slot(key.encode()) for key in flow_keys(endpoint_id)}) == 1
        slots.add(key_slot(flow_keys(endpoint_id).pause.encode()))
    assert len(slots) > 900  # a thousand destinations, a thousand-odd slots of 16,384


async def test_the_gate_holds_a_destinations_ceiling_on_a_cluster(cluster: RedisCluster) -> None:
    endpoint_id = new_id("ep")
    granted = await asyncio.gather(
        *(grant(cluster, endpoint_id, max_in_flight=2) for _ in range(10))
    )
    assert sorted(granted) == [0] * 8 + [1] * 2
    assert await cast("Awaitable[int]", cluster.zcard(flow_keys(endpoint_id).slots)) == 2


async def test_a_thousand_destinations_spread_over_the_masters(cluster: RedisCluster) -> None:
    for _ in range(1_000):
        assert await grant(cluster, new_id("ep"), max_in_flight=1) == 1
    counts = [await cluster.dbsize(target_nodes=node) for node in cluster.get_primaries()]
    mean = sum(counts) / len(counts)
    assert len(counts) == 3 and max(counts) <= 2 * mean, counts


async def test_the_wake_ups_arm_and_take_on_a_cluster(cluster: RedisCluster) -> None:
    keys = [f"{WAKE}:tenants", f"{WAKE}:hold", f"{WAKE}:bell"]
    arms = ("ten_a", "ep_a", 0, "ten_b", "ep_b", 0)
    moved = await run(cluster, wakeup_scripts.ARM, keys, f"{WAKE}:t:", 0, *arms)
    assert int(moved) == 2
    taken = await run(cluster, wakeup_scripts.TAKE, keys[:2], f"{WAKE}:t:", 5000, "token")
    assert taken[0] == 1 and (taken[1], taken[2]) in {("ten_a", "ep_a"), ("ten_b", "ep_b")}
    assert await cast("Awaitable[str]", cluster.hget(f"{WAKE}:hold", taken[2])) == "token"


async def test_herald_s_own_client_finds_the_cluster_from_its_url(tmp_path: Path) -> None:
    """HERALD_REDIS_URL spelled redis+cluster://: the wake-ups run through Herald's client,
    reload their scripts on every master after SCRIPT FLUSH, and an idle taker's BLPOP wakes."""
    servers = TcpRedisCluster(tmp_path / "cluster")
    await asyncio.to_thread(servers.start)
    client = create_cluster(servers.herald_url)
    try:
        wakeups = Wakeups(client, REGION)
        await client.script_flush()  # as a restarted or failed-over master has no scripts
        # The arm goes in a pipeline: its NOSCRIPT comes back there and the script is loaded.
        assert await wakeups.arm([Arm("ten_a", "ep_a"), Arm("ten_b", "ep_b", in_seconds=60)]) == 2
        taken = await wakeups.take(hold_seconds=5, token="t1")
        assert (taken.tenant_id, taken.endpoint_id) == ("ten_a", "ep_a")
        assert not (await wakeups.take(hold_seconds=5, token="t2")).endpoint_id
        await wakeups.settle(taken, in_seconds=None)
        assert await wakeups.count_entries() == 1  # ten_b's, due in a minute
        bell = f"{WAKE}:bell"
        rung = await cast("Awaitable[int]", client.llen(bell))
        assert rung >= 1
        await wakeups.wait_bell(client, 0.5)  # BLPOP on the bell's master takes a ring
        assert await cast("Awaitable[int]", client.llen(bell)) == rung - 1
    finally:
        await client.aclose()
        await asyncio.to_thread(servers.close)
