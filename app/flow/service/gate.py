"""Per-destination flow control shared by every worker, kept in Redis.

Two ceilings, because they protect against different overloads: an in-flight ceiling (sockets,
memory, the receiver's concurrent capacity) and a start-rate ceiling (a receiver allowing N
requests per interval). Plus pauses (a receiver's Retry-After, the circuit breaker's cool-down)
and the breaker's single probe. One Lua script (gate_scripts.GRANT) decides atomically, on
Redis's clock, how many starts a destination may have now -- a batch for the pump's next claim
-- and reserves them: an in-flight slot each, and a start time each on the rate ceiling.

Losing Redis only resets these counters: limits start over, nothing blocks forever. In-flight
slots are leases that expire by themselves, so a dead worker's slot frees itself.

What each grant keeps to is the destination's policy (policies.py), read from PostgreSQL and
cached per process. The API's and the console's look at a destination's flow state, and their
clearing and waking of it, are in flow_state.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.config import Settings
from app.core.redis_clients import FlowRedis, LuaScript
from app.flow.service import gate_scripts
from app.flow.service.delivery_rates import DeliveryRates
from app.flow.service.gate_scripts import flow_keys
from app.flow.service.policies import Policy, PolicyCache
from app.flow.service.rates import RATE_HORIZON_US, late_start_allowed
from app.flow.service.wakeups import wake_waiting

log = structlog.get_logger("herald.flow")


def _mark(flag: bytes | str) -> str:
    """The caller's mark in a waiting flag (the grant id after it is the script's own)."""
    return _text(flag).rpartition("|")[0]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class Grant:
    """Starts one caller may make to one destination now. Start i (0 <= i < count) holds
    in-flight slot ``slot(i)`` until it is answered or recorded (answered.py), and may begin
    ``start_offset(i)`` seconds after the script ran (on Redis's clock): never earlier, and no
    later than ``late_start`` after that -- a start that cannot is given back unsent.
    Consecutive starts are a whole interval apart, across grants too, so starts that keep to
    their windows keep to the ceiling's bound (``start_burst``)."""

    endpoint_id: str
    grant_id: str
    count: int  # how many deliveries may start (0: none)
    reason: str | None  # None: not limited; paused | in_flight | probing | rate | probe
    reopens_in: float  # seconds until more may be granted (in_flight: a safety wake only)
    first_start_in: float  # seconds until start 0 may begin (rate ceiling), 0 otherwise
    interval: float  # seconds between consecutive starts (0 without a rate ceiling)
    # For return_unused: the tat this grant stored, exactly as stored ('': none), and the
    # interval in the whole microseconds the script counted in.
    _tat: str = field(default="", repr=False, compare=False)
    _interval_us: int = field(default=0, repr=False, compare=False)
    # The tenant whose delivery rate this grant's starts were taken from, and its interval.
    _tenant_id: str = field(default="", repr=False, compare=False)
    _tenant_interval_us: int = field(default=0, repr=False, compare=False)
    # How many of its starts were given back to the tenant so far: a grant may be returned in
    # steps (capacity short, then a claim that found fewer rows), each giving back the rest.
    _tenant_returned: list[int] = field(default_factory=lambda: [0], repr=False, compare=False)

    def start_offset(self, i: int) -> float:
        return self.first_start_in + i * self.interval

    @property
    def late_start(self) -> float:
        """How late after its slot a start of this grant may still begin (rate ceiling only)."""
        return late_start_allowed(self.interval)

    def slot(self, i: int) -> str:
        return f"{self.grant_id}:{i}"


class Gate:
    def __init__(
        self,
        settings: Settings,
        sessionmaker: async_sessionmaker[AsyncSession],
        redis: FlowRedis,
        cache_seconds: float = 1.0,
    ) -> None:
        self._settings = settings
        self._redis = redis
        self._policies = PolicyCache(settings, sessionmaker, cache_seconds)
        self._grant = LuaScript(redis, gate_scripts.GRANT)
        self._tenant_rates = DeliveryRates(redis, RATE_HORIZON_US)
        self._return_unused = LuaScript(redis, gate_scripts.RETURN_UNUSED)
        self._release_slots = LuaScript(redis, gate_scripts.RELEASE_SLOTS)
        self._pause = LuaScript(redis, gate_scripts.PAUSE)
        self._carry_slot = LuaScript(redis, gate_scripts.CARRY_SLOT)

    async def policy(self, endpoint_id: str) -> Policy:
        return await self._policies.policy(endpoint_id)

    def cached_policy(self, endpoint_id: str) -> Policy | None:
        """The policy as this process last read it, if that is recent enough to use (no read:
        for a decision that must not wait for one)."""
        return self._policies.cached_policy(endpoint_id)

    def forget(self, endpoint_id: str) -> None:
        """This process just changed the endpoint's flow state: read it afresh next time (and
        not from a read that was already under way)."""
        self._policies.forget(endpoint_id)

    def succeeded(self, endpoint_id: str) -> None:
        """A success closes a tripped breaker: its policy is read afresh (a healthy one is
        kept)."""
        self._policies.succeeded(endpoint_id)

    async def carry_slot(self, endpoint_id: str, slot: str, policy: Policy) -> float:
        """Carry a finished attempt's in-flight slot over to the next delivery of its stream,
        for a whole lease (gate_scripts.CARRY_SLOT): 0.0 when it may start, a negative number
        when the slot had expired, else the seconds the destination is paused for (the slot is
        then released as usual)."""
        keys = flow_keys(endpoint_id)
        lease_ms = int(self._settings.lease_duration * 1000)
        paused_ms = await self._carry_slot(
            keys=[keys.pause, keys.slots], args=[slot, lease_ms, policy.max_in_flight]
        )
        paused_ms = int(paused_ms)
        return -1.0 if paused_ms < 0 else paused_ms / 1000

    async def grant(
        self, endpoint_id: str, *, tenant_id: str, want: int, policy: Policy | None = None
    ) -> Grant:
        """Up to ``want`` starts to this destination, reserved. A Redis error propagates: a
        batch must not pass a gate that cannot count it."""
        if want < 1:
            raise ValueError("a grant wants at least one start")
        if policy is None:
            policy = await self.policy(endpoint_id)
        grant_id = uuid.uuid4().hex
        interval = policy.interval_us / 1e6
        if policy.paused_for > 0:  # PostgreSQL's pause holds even when Redis lost its mirror
            return Grant(endpoint_id, grant_id, 0, "paused", policy.paused_for, 0.0, interval)
        lease_ms = int(self._settings.lease_duration * 1000)
        count, reason, reopens_us, first_us, tat = await self._grant(
            keys=list(flow_keys(endpoint_id)),
            args=[
                policy.interval_us,
                policy.max_in_flight,
                grant_id,
                lease_ms,
                "1" if policy.half_open else "0",
                want,
                RATE_HORIZON_US,
                tenant_id,
            ],
        )
        grant = Grant(
            endpoint_id,
            grant_id,
            int(count),
            _text(reason) or None,
            reopens_in=max(0, int(reopens_us)) / 1e6,
            first_start_in=int(first_us) / 1e6,
            interval=interval,
            _tat=_text(tat),
            _interval_us=policy.interval_us,
        )
        if grant.count == 0 or not policy.tenant_interval_us:
            return grant
        return await self._within_tenant_rate(grant, policy)

    async def _within_tenant_rate(self, grant: Grant, policy: Policy) -> Grant:
        """The destination's grant cut to what the tenant's delivery rate allows, the rest
        given back to the destination."""
        taken = await self._tenant_rates.take(
            policy.tenant_id, policy.tenant_interval_us, grant.count
        )
        if taken.count < grant.count:
            await self.return_unused(grant, used=taken.count)
        return replace(
            grant,
            count=taken.count,
            reason="tenant_rate" if taken.count < grant.count else grant.reason,
            reopens_in=taken.wait if taken.count < grant.count else grant.reopens_in,
            _tenant_id=policy.tenant_id,
            _tenant_interval_us=policy.tenant_interval_us,
        )

    async def return_unused(self, grant: Grant, *, used: int) -> None:
        """The claim found fewer rows than granted: give the rest of the grant back, and wake
        the destination if another grant was refused meanwhile for want of those slots (its
        own flag only said "there may be more work than slots": waking on it would grant, find
        nothing and flag again, forever). Best effort: unreturned slots expire with their
        lease, an unreturned start is a short gap. A wake Redis refuses raises."""
        if used >= grant.count:
            return
        unused = grant.count - max(0, used) - grant._tenant_returned[0]
        if grant._tenant_interval_us and unused > 0:
            # The tenant's unused starts back first: a claim that found fewer rows than it was
            # granted costs the tenant nothing of its rate.
            grant._tenant_returned[0] += unused
            try:
                await self._tenant_rates.give_back(
                    grant._tenant_id, grant._tenant_interval_us, unused
                )
            except Exception as exc:
                log.warning("flow.tenant_return_failed", error=type(exc).__name__)
        keys = flow_keys(grant.endpoint_id)
        try:
            waiting = await self._return_unused(
                keys=[keys.tat, keys.slots, keys.probe, keys.waiting, keys.tat_by],
                args=[grant.grant_id, max(0, used), grant.count, grant._tat, grant._interval_us],
            )
        except Exception as exc:
            log.warning(
                "flow.return_failed", endpoint_id=grant.endpoint_id, error=type(exc).__name__
            )
            return
        if waiting is not None:
            await wake_waiting(self._redis, [(grant.endpoint_id, _mark(waiting))])

    async def release(self, slots: Mapping[str, Sequence[str]]) -> None:
        """Free the in-flight slots of attempts that are over (endpoint id -> slots), the probe
        too if one of them was it, and wake each destination whose work waited for a slot --
        once: its flag is taken atomically, so of all concurrent releases exactly one wakes
        it. A release Redis refuses is left to the slots' expiry; a wake it refuses raises,
        after every release was tried."""
        waiting: list[tuple[str, str]] = []
        try:
            for endpoint_id, held in slots.items():
                flag = await self._free(endpoint_id, held)
                if flag is not None:
                    waiting.append((endpoint_id, flag))
        finally:
            # Whatever was released is woken, even if a later release was cut short.
            if waiting:
                await wake_waiting(self._redis, waiting)

    async def _free(self, endpoint_id: str, slots: Sequence[str]) -> str | None:
        """The waiting flag's mark if this release took it."""
        if not slots:
            return None
        keys = flow_keys(endpoint_id)
        try:
            flag = await self._release_slots(
                keys=[keys.slots, keys.probe, keys.waiting], args=list(slots)
            )
        except Exception as exc:
            # Not woken now, the destination wakes at the earliest slot expiry it settled at.
            log.warning("flow.release_failed", endpoint_id=endpoint_id, error=type(exc).__name__)
            return None
        return None if flag is None else _mark(flag)

    async def pause(self, endpoint_id: str, seconds: float) -> None:
        self.forget(endpoint_id)
        try:
            await self._pause(
                keys=[flow_keys(endpoint_id).pause], args=[max(1, int(seconds * 1000))]
            )
        except Exception as exc:
            log.warning("flow.pause_failed", endpoint_id=endpoint_id, error=type(exc).__name__)
