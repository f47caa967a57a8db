"""Per-destination wake-ups in Redis: which destination a taker should serve next, and when.

One entry per destination (endpoint) with live work, whatever its backlog: a million due
deliveries to one endpoint are one entry. Entries are hints derived from PostgreSQL (the truth,
re-derived by reconcile): losing them delays deliveries, never loses them.

Keys of a region, all times in milliseconds on Redis's clock (``TIME``), all under the hash
tag ``{<region>}`` so that on a Redis Cluster they share one slot, as the scripts need:

- ``herald:wake:{<region>}:tenants`` ZSET tenant → when to look at the tenant next (its
  earliest entry; after a take, the back of the line among due tenants)
- ``herald:wake:{<region>}:t:<tenant>`` ZSET endpoint → when the destination is due
- ``herald:wake:{<region>}:hold`` HASH endpoint → token of the taker that holds it
- ``herald:wake:{<region>}:bell`` LIST ≤ 4 tokens that idle takers ``BLPOP``

A take does not remove its entry: it moves it to now + hold, so a taker that dies loses nothing
(the entry comes due again). Any arm breaks the hold, so a holder whose claim predates the
arm's work can no longer postpone or remove the entry.

Redis errors propagate: a taker backs off, a relay does not mark as published what it could
not arm.

The Lua is in wakeup_scripts.py. The scripts build the per-tenant keys inside Lua, which a
Redis Cluster allows only within the slot the declared keys share: the region's tag.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.exceptions import NoScriptError

from app.core.metrics import WAKEUPS
from app.core.redis_clients import FlowRedis, LuaScript
from app.flow.service import wakeup_scripts
from app.streams.service.heads import NewHead, seconds_until

ARMS_PER_CALL = 500  # bounds how long one script holds Redis; a pipeline carries the rest
BELL_FLOOR_SECONDS = 0.01  # BLPOP's timeout 0 means "forever", and < 1 ms rounds down to it
RETRY_CAP_SECONDS = 1.0
_MAX_SECONDS = 2**40 / 1000  # ~35 years: keeps every score far below 2**53


def _ms(seconds: float) -> int:
    """Whole milliseconds from now, rounded up (never due early); ≤ 0 (or NaN) is now."""
    if not seconds > 0:
        return 0
    return math.ceil(min(seconds, _MAX_SECONDS) * 1000)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class Arm:
    tenant_id: str
    endpoint_id: str
    in_seconds: float = 0.0  # relative to Redis's clock; <= 0 means now

    @classmethod
    def for_heads(cls, heads: Sequence[NewHead]) -> list[Arm]:
        """The wake-ups of deliveries that just became their streams' heads."""
        return [cls(h.tenant_id, h.endpoint_id, seconds_until(h)) for h in heads]


@dataclass(frozen=True)
class Taken:
    tenant_id: str | None  # None: nothing due anywhere
    endpoint_id: str | None
    token: str  # hold token (the one passed to take)
    others_due: bool  # other tenants have due destinations right now
    retry_in: float  # nothing taken: seconds until the earliest known entry is due (≤ 1.0)


@dataclass(frozen=True)
class WakeSnapshot:
    due_in: float | None  # seconds until the destination's entry is due (<= 0: due now)
    held: bool  # a taker holds it right now


class Wakeups:
    def __init__(self, redis: FlowRedis, region: str) -> None:
        self.redis = redis
        base = f"herald:wake:{{{region}}}"
        self._tenants = f"{base}:tenants"
        self._hold = f"{base}:hold"
        self._bell = f"{base}:bell"
        self._prefix = f"{base}:t:"
        self._arm = LuaScript(redis, wakeup_scripts.ARM)
        self._take = LuaScript(redis, wakeup_scripts.TAKE)
        self._settle = LuaScript(redis, wakeup_scripts.SETTLE)
        self._snapshot = LuaScript(redis, wakeup_scripts.SNAPSHOT)

    async def arm(self, arms: Sequence[Arm], *, slack_seconds: float = 0.0) -> int:
        """Create entries or move them earlier (never later), in one round trip. Returns how
        many entries were created, or moved earlier by more than ``slack_seconds``."""
        calls: list[list[str | int]] = []
        for start in range(0, len(arms), ARMS_PER_CALL):
            args: list[str | int] = [self._prefix, _ms(slack_seconds)]
            for arm in arms[start : start + ARMS_PER_CALL]:
                args += [arm.tenant_id, arm.endpoint_id, _ms(arm.in_seconds)]
            calls.append(args)
        if not calls:
            return 0
        keys = [self._tenants, self._hold, self._bell]
        return sum(int(moved) for moved in await self._pipelined(self._arm, keys, calls))

    async def _pipelined(
        self, script: LuaScript, keys: list[str], calls: list[list[str | int]]
    ) -> list[Any]:
        # EVALSHA, and the whole script (EVAL) only for the calls whose node said it lacks it.
        async def run(command: str, body: str, batch: list[list[str | int]]) -> list[Any]:
            pipe = self.redis.pipeline(transaction=False)
            for args in batch:
                # execute_command, not evalsha(): redis-py refuses EVALSHA in a cluster's
                # pipeline by name, since it cannot route one without keys; these have keys.
                pipe.execute_command(command, body, len(keys), *keys, *map(str, args))
            return list(await pipe.execute(raise_on_error=False))

        results = await run("EVALSHA", script.sha, calls)
        missing = [i for i, result in enumerate(results) if isinstance(result, NoScriptError)]
        if missing:
            again = await run("EVAL", script.source, [calls[i] for i in missing])
            for i, result in zip(missing, again, strict=True):
                results[i] = result
        for result in results:
            if isinstance(result, Exception):
                raise result
        return results

    async def take(self, *, hold_seconds: float, token: str) -> Taken:
        """Hold the most deserving due destination: the tenant waiting longest, then its
        earliest destination. The entry stays, due again after ``hold_seconds``."""
        reply = await self._take(
            keys=[self._tenants, self._hold],
            args=[self._prefix, max(1, _ms(hold_seconds)), token],
        )
        if int(reply[0]) == 1:
            WAKEUPS.inc()
            return Taken(_text(reply[1]), _text(reply[2]), token, int(reply[3]) > 0, 0.0)
        wait_ms = int(reply[1])
        retry_in = RETRY_CAP_SECONDS if wait_ms < 0 else min(wait_ms / 1000, RETRY_CAP_SECONDS)
        return Taken(None, None, token, others_due=False, retry_in=retry_in)

    async def settle(self, taken: Taken, *, in_seconds: float | None) -> None:
        """Still ours: due in ``in_seconds`` (None: nothing live, remove it). Armed or taken
        by someone since: only ever earlier (None: leave it)."""
        if taken.tenant_id is None or taken.endpoint_id is None:
            return
        await self._settle(
            keys=[self._tenants, self._hold, self._bell, self._prefix + taken.tenant_id],
            args=[
                taken.tenant_id,
                taken.endpoint_id,
                taken.token,
                -1 if in_seconds is None else _ms(in_seconds),
            ],
        )

    async def wait_bell(self, connection: FlowRedis, timeout: float) -> None:
        """Block until an arm or settle rings, or ``timeout`` passes. BLPOP blocks its
        connection, so the caller passes one of its own; keep ``timeout`` below that
        connection's socket timeout."""
        seconds = timeout if timeout > BELL_FLOOR_SECONDS else BELL_FLOOR_SECONDS
        # Not blpop(): redis-py types its timeout as whole seconds; Redis (≥ 6) takes decimals.
        await connection.execute_command("BLPOP", self._bell, seconds)

    async def snapshot(self, tenant_id: str, endpoint_id: str) -> WakeSnapshot:
        exists, due_in_ms, held = await self._snapshot(
            keys=[self._prefix + tenant_id, self._hold], args=[endpoint_id]
        )
        if not int(exists):
            return WakeSnapshot(due_in=None, held=False)
        return WakeSnapshot(due_in=int(due_in_ms) / 1000, held=bool(int(held)))

    async def count_entries(self) -> int:
        """Σ entries over the region's tenants (tests and metrics: a SCAN, not a hot path)."""
        keys = [key async for key in self.redis.scan_iter(match=f"{self._prefix}*", count=500)]
        if not keys:
            return 0
        pipe = self.redis.pipeline(transaction=False)
        for key in keys:
            pipe.zcard(key)
        return sum(int(count) for count in await pipe.execute())


def waiting_flag(region: str, tenant_id: str) -> str:
    """What a destination's waiting flag (flow control) holds: the region and tenant its
    wake-up is filed under. Flow keys are per endpoint, not per region, so the release that
    takes the flag may run in another region than the grant that set it."""
    return f"{region}/{tenant_id}"


async def wake_waiting(redis: FlowRedis, taken: Sequence[tuple[str, str]]) -> None:
    """Arm now each destination whose waiting flag a release took: (endpoint id, flag)."""
    by_region: dict[str, list[Arm]] = {}
    for endpoint_id, flag in taken:
        region, _, tenant_id = flag.partition("/")
        by_region.setdefault(region, []).append(Arm(tenant_id, endpoint_id, 0.0))
    for region, arms in by_region.items():
        await Wakeups(redis, region).arm(arms)
