"""A worker's local capacity: ``WORKER_CONCURRENCY`` units, one per claimed row until its ending
is recorded or it is given back -- and the share rule that keeps one tenant from filling them
while others wait."""

from __future__ import annotations

import asyncio
import math

# When other tenants are due too, one tenant may fill at most this share of a worker's capacity
# (work-conserving: alone, it may use all of it).
TENANT_SHARE = 0.5


class Capacity:
    def __init__(self, units: int) -> None:
        self.units = units
        self.free = units
        self.by_tenant: dict[str, int] = {}
        self.room = asyncio.Event()  # set while a unit is free
        self.room.set()

    def wanted(self, tenant_id: str | None, *, others_due: bool, batch_max: int) -> int:
        """How many rows a taker may claim for ``tenant_id`` now."""
        want = min(batch_max, self.free)
        if others_due and tenant_id is not None:
            # At least one, so that a worker of concurrency 1 serves anyone at all; rounded up,
            # so that two tenants at their share fill the worker and its takers wait for room.
            share = max(1, math.ceil(self.units * TENANT_SHARE))
            held = self.by_tenant.get(tenant_id, 0)
            want = min(want, max(share - held, 0))
        return want

    def take(self, tenant_id: str, count: int) -> None:
        self.free -= count
        self.by_tenant[tenant_id] = self.by_tenant.get(tenant_id, 0) + count
        if self.free <= 0:
            self.room.clear()

    def give(self, tenant_id: str, count: int = 1) -> None:
        self.free += count
        left = self.by_tenant.get(tenant_id, 0) - count
        if left > 0:
            self.by_tenant[tenant_id] = left
        else:
            self.by_tenant.pop(tenant_id, None)
        if self.free > 0:
            self.room.set()


class Unit:
    """One claimed row's unit, given back once: when its answer is in (answered.py) or when its
    ending is recorded or given back, whichever comes first."""

    __slots__ = ("_capacity", "_held", "_tenant_id")

    def __init__(self, capacity: Capacity, tenant_id: str) -> None:
        self._capacity = capacity
        self._tenant_id = tenant_id
        self._held = True

    def give(self) -> None:
        if self._held:
            self._held = False
            self._capacity.give(self._tenant_id)
