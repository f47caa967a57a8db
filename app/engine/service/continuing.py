"""Continuing a stream on the worker that ended its head (docs/decisions.md, "A stream goes on
from its record").

An ordered stream waits between two deliveries for whatever runs from the head's answer to its
successor's request. Through the wake-ups that is the record, a slot release, an arm, a take,
a grant, a claim and a settle -- seven round trips where the record alone is four. So when a
group commit ends a head, the worker that sent it may keep going: the same transaction that
hands the stream on leases the new head (``delivery_records.record_ordered``), the head's in-flight
slot is carried over to it (one out, one in: the ceiling holds), and its attempt starts as soon
as the commit returns.

Only where nothing needs asking first: a destination whose policy this process holds fresh,
with no start-rate ceiling (a rate needs a grant's start time), not paused and not half-open,
and a worker with a free unit of capacity (a busy worker leaves the stream to the wake-ups,
where the tenant share applies). Redis's pause mirror -- a 429 another worker saw a moment ago
-- is checked while the transaction runs; a successor that finds its destination paused is
given back unsent and armed for the pause's end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core import metrics
from app.core.db import single_statements
from app.engine.repository import delivery_records
from app.engine.repository.delivery_leases import ClaimedDelivery
from app.flow.service.gate import Gate
from app.flow.service.policies import Policy
from app.flow.service.wakeups import Arm
from app.streams.service.heads import StreamKey

log = structlog.get_logger("herald.delivery")


class Continuer(Protocol):
    """What the pump lends a group commit to continue streams with."""

    def reserve(self, tenant_id: str, endpoint_id: str) -> Policy | None:
        """A unit of capacity for a successor, and the destination's policy; None: not here."""

    def unreserve(self, tenant_id: str) -> None: ...

    def run_continued(self, claimed: ClaimedDelivery, slot: str, lease_ends: float) -> None:
        """Run the leased successor's attempt in the carried slot (it gives the unit back)."""


@dataclass
class _Carry:
    tenant_id: str
    slot: str
    open_check: asyncio.Task[float]  # the carry script: 0.0, or the pause's seconds


@dataclass
class Continuing:
    """The streams one group commit may continue, each with the slot of the head it ends."""

    continuer: Continuer
    gate: Gate
    started_at: float  # before the transaction: the leases it hands out end no earlier
    carries: dict[StreamKey, _Carry] = field(default_factory=dict)

    @classmethod
    def reserve(
        cls,
        continuer: Continuer,
        gate: Gate,
        heads: Sequence[tuple[StreamKey, str, str | None]],
    ) -> Continuing:
        """For each (stream, tenant, slot) whose head this commit may end: a reserved unit,
        and the carry script already on its way to Redis."""
        continuing = cls(continuer, gate, asyncio.get_running_loop().time())
        for key, tenant_id, slot in heads:
            if slot is None or key in continuing.carries:
                continue
            policy = continuer.reserve(tenant_id, key.endpoint_id)
            if policy is None:
                continue
            check = asyncio.create_task(gate.carry_slot(key.endpoint_id, slot, policy))
            continuing.carries[key] = _Carry(tenant_id, slot, check)
        return continuing

    def continued_streams(self) -> list[StreamKey]:
        return list(self.carries)

    async def proceed(
        self,
        leased: Sequence[ClaimedDelivery],
        sessionmaker: async_sessionmaker[AsyncSession],
        arms: list[Arm],
        carried: set[str],
    ) -> None:
        """After the commit: start every leased successor whose destination is open, its
        slot added to ``carried`` before it starts (so that nothing releases it under the
        running attempt, whatever fails later); give back the others unsent and arm them --
        for the pause's end, or at once when the slot could not be carried -- and give back
        every unit reserved for nothing."""
        give_back: list[ClaimedDelivery] = []
        try:
            for claimed in leased:
                carry = self.carries.pop(StreamKey(claimed.endpoint_id, claimed.stream or ""))
                wait: float | None = 0.0
                try:
                    wait = await self._open_in(carry)
                    if wait is None:
                        carried.add(carry.slot)
                        self.continuer.run_continued(
                            claimed, carry.slot, self.started_at + claimed.lease_left
                        )
                        metrics.STREAMS_CONTINUED.inc()
                        continue
                except BaseException:
                    carried.discard(carry.slot)
                    wait = 0.0
                    raise
                finally:
                    if carry.slot not in carried:  # not started: its unit and lease go back
                        self.continuer.unreserve(carry.tenant_id)
                        give_back.append(claimed)
                        arms.append(Arm(carry.tenant_id, claimed.endpoint_id, wait or 0.0))
        finally:
            await self.release()
            if give_back:
                await _give_back(sessionmaker, give_back)

    @staticmethod
    async def _open_in(carry: _Carry) -> float | None:
        """None when the successor may start in the carried slot; else the seconds until its
        destination may be tried again (a pause's end; 0 for a slot that had expired)."""
        try:
            paused_for = await carry.open_check
        except Exception as exc:  # Redis could not say: the destination may be paused
            log.warning("delivery.continue_unchecked", error=type(exc).__name__)
            return 1.0
        if paused_for < 0:  # the slot had expired: its place may be someone else's by now
            return 0.0
        return paused_for if paused_for > 0 else None

    async def release(self) -> None:
        """Give back the units of streams not continued. Their slots are released as usual,
        after this: the carry script must have run by then, or it would put a released slot
        back for a whole lease."""
        carries, self.carries = list(self.carries.values()), {}
        for carry in carries:
            with contextlib.suppress(Exception):
                await carry.open_check
            self.continuer.unreserve(carry.tenant_id)


async def _give_back(
    sessionmaker: async_sessionmaker[AsyncSession], leased: Sequence[ClaimedDelivery]
) -> None:
    """Unsent leases back, uncounted; one the database would not take back ends by itself
    (its lease runs out and a claim takes it over: the destination is armed meanwhile)."""
    metrics.LEASES_GIVEN_BACK.inc(len(leased))
    try:
        async with single_statements(sessionmaker) as connection:
            await delivery_records.release_batch(connection, [(c.id, c.token) for c in leased])
    except Exception as exc:
        log.warning("delivery.continue_give_back_failed", error=type(exc).__name__)
