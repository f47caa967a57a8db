"""What an answered attempt stops holding before its record commits.

An in-flight slot counts requests at the receiver, and a worker's unit counts requests it has
going: once a success's answer is in, neither is in use. Waiting for the group commit to free
them kept each slot idle for a commit or two per request. So a plain success frees both as
soon as it is answered; the record follows on its own.

Not freed early: a failure or a 410 (the breaker and Retry-After decide on them, in their
record, before the destination may start more); an ordered delivery (its slot is handed on to
the stream's next, in the record); a half-open breaker's probe (the next probe waits for its
record). And a unit is kept while the recorder already holds a worker's worth of endings, so
what a worker leases stays bounded when PostgreSQL is slow.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import structlog

from app.core.states import Outcome
from app.engine.service.attempts import Ended
from app.engine.service.capacity import Unit
from app.flow.service.gate import Gate

log = structlog.get_logger("herald.delivery")


class EarlyRelease:
    def __init__(self, gate: Gate, pending_max: int) -> None:
        self._gate = gate
        self._pending_max = pending_max
        self._slots: dict[str, list[str]] = defaultdict(list)
        self._releasing: set[asyncio.Task[None]] = set()

    def free(self, ended: Ended, slot: str, unit: Unit, *, recording: int) -> bool:
        """Free ``slot`` and ``unit`` now if ``ended`` allows it (``recording``: endings the
        recorder holds); whether it did -- then the record must not free the slot again."""
        claimed, result = ended.claimed, ended.result
        if result is None or result.outcome is not Outcome.SUCCESS:
            return False
        if claimed.stream_seq is not None or recording >= self._pending_max:
            return False
        policy = self._gate.cached_policy(claimed.endpoint_id)
        if policy is None or policy.half_open:
            return False
        unit.give()
        if not self._slots:  # the first this turn of the loop: one release for all of them
            asyncio.get_running_loop().call_soon(self._release)
        self._slots[claimed.endpoint_id].append(slot)
        return True

    def _release(self) -> None:
        slots, self._slots = self._slots, defaultdict(list)
        task = asyncio.create_task(self._released(slots), name="herald-early-release")
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    async def _released(self, slots: dict[str, list[str]]) -> None:
        try:
            await self._gate.release(slots)
        except Exception as exc:  # the slots expire with their lease; the wake is a nicety
            log.warning("flow.wake_failed", error=type(exc).__name__)

    async def close(self) -> None:
        while self._releasing:
            await asyncio.gather(*self._releasing, return_exceptions=True)
