"""The delivery pump: every `herald worker` runs one. It takes due destinations from Redis's
wake-ups, asks the destination's gate how many deliveries may start, claims that many in one
statement, sends each, and hands the endings to the recorder's group commit.

Nothing is polled while it waits: a destination that may not start anything (paused, at its
in-flight ceiling, out of rate, half-open with its probe out) is settled for the moment its gate
opens, or left for the freed slot that wakes it. Capacity is local: a claimed row holds one unit
of ``WORKER_CONCURRENCY`` until it is answered, recorded or given back, and takers claim only
what can start now.
"""

from __future__ import annotations

import asyncio
import random
import uuid

import structlog
from redis.exceptions import RedisClusterException, RedisError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core import metrics
from app.core.config import Settings
from app.core.db import DATABASE_TROUBLE, single_statements
from app.core.faults import crash_point, stall_point
from app.core.redis_clients import FlowRedis
from app.engine.repository import delivery_leases
from app.engine.repository.delivery_leases import ClaimedDelivery
from app.engine.service.attempt_runs import AttemptRuns, StartWindow
from app.engine.service.capacity import Capacity, Unit
from app.engine.service.deadlines import (
    BEFORE_LEASE_SECONDS,
    cancel_until_done,
    unstoppable,
)
from app.engine.service.recorder import Recorder
from app.flow.service.gate import Gate, Grant
from app.flow.service.policies import Policy
from app.flow.service.wakeups import Taken, Wakeups, waiting_flag

log = structlog.get_logger("herald.delivery")

# A taken destination is held this long: if its taker dies, it comes due again by itself.
HOLD_SECONDS = 10.0
TAKERS = 2
BACKOFF_MAX_SECONDS = 5.0
# What makes a taker back off and try again: Redis or PostgreSQL away for a while.
# A cluster none of whose nodes answers raises RedisClusterException, which is no RedisError.
_PASSING: tuple[type[Exception], ...] = (
    RedisError,
    RedisClusterException,
    OSError,
    *DATABASE_TROUBLE,
)
# A claim skips rows another transaction holds locked (a publish mark, another claim), yet
# they are due: the destination is looked at again after a pause that doubles while that lasts
# (a lock is usually gone within milliseconds), instead of being claimed in a busy loop.
LOCKED_FIRST_PAUSE_SECONDS = 0.005
LOCKED_MAX_PAUSE_SECONDS = 1.0
# Destinations remembered as backlogged (bounded: a worker serves any number of them).
BACKLOGS_KEPT = 10_000


class Pump:
    def __init__(
        self,
        settings: Settings,
        sessionmaker: async_sessionmaker[AsyncSession],
        redis: FlowRedis,
        gate: Gate,
        wakeups: Wakeups,
        runs: AttemptRuns,
        recorder: Recorder,
    ) -> None:
        """Handed its parts, each built once where the worker is wired (workers/runner.py):
        ``runs`` runs the claimed deliveries and hands their endings to ``recorder``, which
        ``drain`` waits for."""
        self._settings = settings
        self._sessionmaker = sessionmaker
        self._redis = redis  # for the takers' blocking wait on the bell
        self._gate = gate
        self._wakeups = wakeups
        self._runs = runs
        self._recorder = recorder
        self._capacity = Capacity(settings.worker_concurrency)
        self._takers: list[asyncio.Task[None]] = []
        self._stopping = False
        self._attempts_running: set[asyncio.Task[None]] = set()
        # Destination -> how many claims in a row skipped due rows that others held locked.
        self._skipped: dict[str, int] = {}
        # Destinations whose last claim here took all it asked for: a backlog, likely.
        self._backlogged: set[str] = set()

    def reserve(self, tenant_id: str, endpoint_id: str) -> Policy | None:
        """The ``Continuer`` of continuing.py: a unit for a stream's next delivery, where nothing
        needs asking first -- a fresh policy with no start rate, no pause, no half-open
        breaker -- and this worker has room (a busy one leaves it to the wake-ups)."""
        policy = self._gate.cached_policy(endpoint_id)
        if self._stopping or self._capacity.free <= 0 or policy is None:
            return None
        if policy.interval_us or policy.paused_for > 0 or policy.half_open or policy.polled:
            return None
        self._capacity.take(tenant_id, 1)
        return policy

    def unreserve(self, tenant_id: str) -> None:
        self._capacity.give(tenant_id)

    def run_continued(self, claimed: ClaimedDelivery, slot: str, lease_ends: float) -> None:
        """Run a continued stream's leased delivery in the slot carried over to it."""
        grant_id, _, i = slot.rpartition(":")
        now = asyncio.get_running_loop().time()
        # The grant that slot came from, as far as the run needs it: no rate, so no window.
        grant = Grant(claimed.endpoint_id, grant_id, int(i) + 1, None, 0.0, 0.0, 0.0)
        self._spawn_attempt(claimed, grant, int(i), StartWindow(now, now, grant), lease_ends)

    def start(self) -> None:
        self._takers = [
            asyncio.create_task(self._taker(), name=f"herald-taker-{n}") for n in range(TAKERS)
        ]

    @property
    def in_flight(self) -> int:
        return len(self._attempts_running)

    async def drain(self, grace: float) -> None:
        """Stop taking; give running attempts ``grace`` seconds, then cut them short (an
        unsent one is given back, a sent one recorded `unknown`); record everything."""
        self._stopping = True
        # Until done: a cancellation can be swallowed inside redis-py (a blocked BLPOP).
        await asyncio.gather(*(cancel_until_done(t) for t in self._takers))
        clock = asyncio.get_running_loop()
        deadline = clock.time() + grace
        if self._attempts_running:
            log.info("worker.draining", in_flight=self.in_flight, grace_seconds=grace)
        # A record under way when the drain began may still continue its stream (it reserved
        # before ``_stopping``): whatever it starts is drained like the rest.
        while self._attempts_running:
            running = list(self._attempts_running)
            _, pending = await asyncio.wait(running, timeout=max(0.0, deadline - clock.time()))
            for task in pending:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            await self._recorder.close()
        await self._recorder.close()
        await self._runs.close()

    async def _taker(self) -> None:
        backoff = 0.25
        while not self._stopping:
            await self._capacity.room.wait()
            try:
                taken = await self._wakeups.take(hold_seconds=HOLD_SECONDS, token=uuid.uuid4().hex)
                if taken.endpoint_id is None:
                    await self._wakeups.wait_bell(self._redis, taken.retry_in)
                    continue
                # Not cut short by a shutdown: a claim or grant cancelled half-way would leave
                # rows leased and slots held by a stopped worker (it is bounded by itself).
                await unstoppable(self._serve(taken))
                backoff = 0.25
            except asyncio.CancelledError:
                raise
            except _PASSING as exc:
                # Redis or PostgreSQL is away: the held destination comes due again by itself.
                log.warning("pump.backoff", error=type(exc).__name__, seconds=backoff)
                await asyncio.sleep(backoff * random.uniform(0.5, 1.0))  # noqa: S311
                backoff = min(backoff * 2, BACKOFF_MAX_SECONDS)
            except Exception:
                log.exception("pump.take_failed")
                await asyncio.sleep(backoff)

    def _want(self, taken: Taken) -> int:
        return self._capacity.wanted(
            taken.tenant_id,
            others_due=taken.others_due,
            batch_max=self._settings.delivery_batch_max,
        )

    async def _serve(self, taken: Taken) -> None:
        endpoint_id, tenant_id = taken.endpoint_id, taken.tenant_id
        assert endpoint_id is not None and tenant_id is not None
        want = self._want(taken)
        if want <= 0:
            # This tenant has its share while others wait: look again soon, after them.
            await self._wakeups.settle(taken, in_seconds=0.0)
            return
        async with asyncio.timeout(BEFORE_LEASE_SECONDS):
            granted = await self._grant(taken, want)
            if granted is None:
                return
            grant, window, count = granted
            # Dying here leaves the destination held and its grant reserved: both expire by
            # themselves (the hold, the slots with their lease), and nothing was claimed.
            crash_point("worker.after_take_before_claim", self._settings.fault)
            backlog = endpoint_id in self._backlogged and grant.reason is None
            try:
                if backlog:
                    # Its last claim here was full, and the gate holds nothing back: let
                    # another taker claim beside this one (SKIP LOCKED keeps their rows apart)
                    # rather than wait for this claim. Should the backlog end with this claim,
                    # the next taker finds nothing and settles it for its next row.
                    await self._wakeups.settle(taken, in_seconds=0.0)
                batch, claimed_at = await self._claim(endpoint_id, count)
            except BaseException:
                self._capacity.give(tenant_id, count)
                await self._gate.return_unused(grant, used=0)
                raise
        rows = batch.rows
        if rows:
            crash_point("worker.after_claim_before_send", self._settings.fault)
            stall_point("worker.stall_after_claim", self._settings.fault)
        for i, row in enumerate(rows):
            self._spawn_attempt(row, grant, i, window, claimed_at + row.lease_left)
        # The attempts run whatever happens next: a settle lost with Redis only leaves the
        # destination held, and it comes due again when the hold ends.
        if len(rows) < count:
            self._backlogged.discard(endpoint_id)
            self._capacity.give(tenant_id, count - len(rows))
            await self._gate.return_unused(grant, used=len(rows))
        elif len(self._backlogged) < BACKLOGS_KEPT:
            self._backlogged.add(endpoint_id)
        if not backlog:
            next_look = self._next_look(endpoint_id, grant, count, batch)
            await self._wakeups.settle(taken, in_seconds=next_look)

    async def _grant(self, taken: Taken, want: int) -> tuple[Grant, StartWindow, int] | None:
        """The slots the gate grants the destination, up to ``want`` and to what this worker
        still has free: the grant, its start window and how many to claim. None when there
        are none: the destination is settled to be looked at again when that may change."""
        endpoint_id, tenant_id = taken.endpoint_id, taken.tenant_id
        assert endpoint_id is not None and tenant_id is not None
        policy = await self._fresh_policy(endpoint_id)
        if policy.polled:
            # Its receiver polls for its deliveries: an accept or reconcile armed it all the
            # same, and it is let go (nothing is claimed; the poll reads from PostgreSQL).
            await self._wakeups.settle(taken, in_seconds=None)
            return None
        if policy.paused_for > 0:
            metrics.DEFERRALS.labels("paused").inc()
            await self._wakeups.settle(taken, in_seconds=policy.paused_for)
            return None
        # Starts are scheduled from when the gate decided, which lies between these two.
        clock = asyncio.get_running_loop()
        asked_at = clock.time()
        grant = await self._gate.grant(
            endpoint_id,
            tenant_id=waiting_flag(self._settings.region, tenant_id),
            want=want,
            policy=policy,
        )
        window = StartWindow(asked_at, clock.time(), grant)
        if grant.count == 0:
            metrics.DEFERRALS.labels(grant.reason or "none").inc()
            await self._wakeups.settle(taken, in_seconds=grant.reopens_in)
            return None
        # The other taker may have used capacity meanwhile: claim only what is still free
        # (taken before anything else is awaited).
        count = min(grant.count, self._capacity.free)
        self._capacity.take(tenant_id, max(count, 0))
        if count < grant.count:
            try:
                await self._gate.return_unused(grant, used=max(count, 0))
            except BaseException:
                self._capacity.give(tenant_id, max(count, 0))
                raise
            if count <= 0:
                await self._wakeups.settle(taken, in_seconds=0.0)
                return None
        return grant, window, count

    async def _fresh_policy(self, endpoint_id: str) -> Policy:
        """The destination's policy; read afresh when the cached one says paused: parking for
        the whole pause on a cached policy could outlast a pause cleared since (an operator
        re-enabled the endpoint, and armed it)."""
        policy = await self._gate.policy(endpoint_id)
        if policy.paused_for > 0:
            self._gate.forget(endpoint_id)
            policy = await self._gate.policy(endpoint_id)
        return policy

    def _next_look(
        self, endpoint_id: str, grant: Grant, count: int, batch: delivery_leases.ClaimBatch
    ) -> float | None:
        """When the destination should be taken next: when its next row is due, if this claim
        took everything due; when the gate opens again, if the gate limited it; else now (more
        is due, and the destination queues behind those that waited longer). Never later than
        the lease end of what was claimed, should this worker die."""
        skipped = self._skipped.pop(endpoint_id, 0)
        if len(batch.rows) < count and batch.next_wake is not None and batch.next_wake <= 0:
            # Due rows the claim could not take: others hold them locked (the claim's probe
            # sees them as they were). Nothing wakes the destination when the lock goes: look
            # again after a pause that grows while it lasts.
            self._skipped[endpoint_id] = skipped + 1
            pause = LOCKED_FIRST_PAUSE_SECONDS * 2 ** min(skipped, 16)
            at: float | None = min(pause, LOCKED_MAX_PAUSE_SECONDS)
        elif len(batch.rows) < count:
            at = batch.next_wake
        elif grant.reason is not None and count == grant.count:
            at = grant.reopens_in
        else:
            at = 0.0
        if batch.rows:
            lease = min(row.lease_left for row in batch.rows)
            at = lease if at is None else min(at, lease)
        return at

    async def _claim(
        self, endpoint_id: str, limit: int
    ) -> tuple[delivery_leases.ClaimBatch, float]:
        clock = asyncio.get_running_loop()
        async with single_statements(self._sessionmaker) as connection:
            # Only now, with a connection in hand: waiting for one is no part of the lease.
            claiming_at = clock.time()
            batch = await delivery_leases.claim_batch(
                connection,
                region=self._settings.region,
                endpoint_id=endpoint_id,
                limit=limit,
                lease_seconds=self._settings.lease_duration,
            )
        metrics.CLAIMS.inc()
        metrics.CLAIMED_ROWS.inc(len(batch.rows))
        return batch, claiming_at

    def _spawn_attempt(
        self,
        claimed: ClaimedDelivery,
        grant: Grant,
        i: int,
        window: StartWindow,
        lease_ends: float,
    ) -> None:
        task = asyncio.create_task(
            self._attempt(claimed, grant, i, window=window, lease_ends=lease_ends)
        )
        self._attempts_running.add(task)
        task.add_done_callback(self._attempts_running.discard)

    async def _attempt(
        self,
        claimed: ClaimedDelivery,
        grant: Grant,
        i: int,
        *,
        window: StartWindow,
        lease_ends: float,
    ) -> None:
        unit = Unit(self._capacity, claimed.tenant_id)
        try:
            await self._runs.run(claimed, grant, i, window=window, lease_ends=lease_ends, unit=unit)
        finally:
            unit.give()
