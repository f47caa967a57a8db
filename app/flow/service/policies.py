"""A destination's flow-control policy: its ceilings, its pause and its breaker as PostgreSQL has
them, with its tenant's delivery rate. The gate (gate.py) grants by it. Each process reads it
from the database and keeps it for a moment (``cache_seconds``): a busy destination's grants do
not each wait for a read.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.config import Settings
from app.endpoints.service import endpoints
from app.flow.service.rates import start_interval_us
from app.tenants.service import limits


@dataclass(frozen=True)
class Policy:
    interval_us: int  # between starts; 0 = no rate ceiling
    max_in_flight: int  # 0 = no ceiling
    paused_for: float  # seconds the database says the destination is paused
    half_open: bool  # the breaker tripped: after its cool-down, one probe at a time
    tenant_id: str = ""
    tenant_interval_us: int = 0  # between the tenant's starts (delivery_rate); 0 = none
    # A polling endpoint: its receiver reads its deliveries, and no worker claims them.
    polled: bool = False


# Past this many cached policies, the expired ones are swept out before the next is kept.
POLICIES_SWEPT_AT = 10_000


class PolicyCache:
    """This process's policies, each kept ``cache_seconds`` after it was read."""

    def __init__(
        self,
        settings: Settings,
        sessionmaker: async_sessionmaker[AsyncSession],
        cache_seconds: float = 1.0,
    ) -> None:
        self._settings = settings
        self._sessionmaker = sessionmaker
        self._cache_seconds = cache_seconds
        self._policies: dict[str, tuple[float, Policy]] = {}
        self._reading: dict[str, asyncio.Future[Policy]] = {}
        self._generations: dict[str, int] = {}
        self._tenant_defaults = limits.Limits.defaults(settings)

    async def policy(self, endpoint_id: str) -> Policy:
        cached = self._policies.get(endpoint_id)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        # Every attempt in flight to this endpoint misses at once when the entry expires: one
        # of them reads, the rest wait for that read (shielded: a waiter's cancellation must
        # not cancel the read the others are waiting for).
        reading = self._reading.get(endpoint_id)
        if reading is None:
            reading = asyncio.ensure_future(self._read_policy(endpoint_id))
            self._reading[endpoint_id] = reading
            reading.add_done_callback(lambda done: self._read_done(endpoint_id, done))
        return await asyncio.shield(reading)

    def cached_policy(self, endpoint_id: str) -> Policy | None:
        """The policy as this process last read it, if that is recent enough to use (no read:
        for a decision that must not wait for one)."""
        cached = self._policies.get(endpoint_id)
        return cached[1] if cached is not None and cached[0] > time.monotonic() else None

    def _read_done(self, endpoint_id: str, done: asyncio.Future[Policy]) -> None:
        if self._reading.get(endpoint_id) is done:
            del self._reading[endpoint_id]

    async def _read_policy(self, endpoint_id: str) -> Policy:
        generation = self._generations.get(endpoint_id, 0)
        async with self._sessionmaker() as session, session.begin():
            found = await endpoints.flow_limits(session, endpoint_id)
            tenant = None if found is None else await limits.tenant_of(session, found.tenant_id)
        rate = self._settings.default_rate_limit_per_second
        in_flight = self._settings.default_max_in_flight
        policy = Policy(0, 0, 0.0, False)
        if found is not None and tenant is not None:
            rate = found.rate(rate)
            policy = Policy(
                interval_us=start_interval_us(rate),
                max_in_flight=found.max_in_flight or in_flight,
                paused_for=found.paused_for,
                half_open=found.breaker_trips > 0,
                tenant_id=tenant.id,
                tenant_interval_us=start_interval_us(
                    self._tenant_defaults.of(tenant).delivery_rate
                ),
                polled=found.polled,
            )
        if self._generations.get(endpoint_id, 0) == generation:
            # Not when forget() ran meanwhile: this read may predate what it forgot.
            if len(self._policies) >= POLICIES_SWEPT_AT:
                self._sweep()
            self._policies[endpoint_id] = (time.monotonic() + self._cache_seconds, policy)
        return policy

    def _sweep(self) -> None:
        """Drop the policies that have expired: the cache keeps only what the last second's
        work touched, however many endpoints there are. An expired entry is one nobody may
        use, so no tenant's work loses a live one to another's. (``_generations`` stays: a
        read that forget() disowned may still be running, and only its generation tells it
        so; it holds an integer per endpoint whose flow state this process changed.)"""
        now = time.monotonic()
        self._policies = {e: kept for e, kept in self._policies.items() if kept[0] > now}

    def forget(self, endpoint_id: str) -> None:
        """This process just changed the endpoint's flow state: read it afresh next time (and
        not from a read that was already under way)."""
        self._policies.pop(endpoint_id, None)
        self._reading.pop(endpoint_id, None)
        self._generations[endpoint_id] = self._generations.get(endpoint_id, 0) + 1

    def succeeded(self, endpoint_id: str) -> None:
        """A success closes a tripped breaker (the record statement did that in the database):
        a half-open policy must be read afresh. A healthy one has not changed, and keeping it
        spares every success a policy read."""
        cached = self._policies.get(endpoint_id)
        if cached is not None and (cached[1].half_open or cached[1].paused_for > 0):
            self.forget(endpoint_id)
