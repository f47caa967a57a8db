"""What flow control holds for one destination at a moment: the gate's counters and its
wake-up. Flow's own type -- the gate and the wake-ups fill it -- kept apart from flow_state.py,
which reads it from Redis, so that delivery's pure explanation (delivery/service/status.py) can
name it without importing Redis."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FlowSnapshot:
    """The destination's live flow-control state in Redis."""

    in_flight: int
    max_in_flight: int  # 0: no ceiling
    next_start_in: float  # seconds until the start-rate ceiling admits the next start
    woken_in: float | None = None  # seconds until its destination's wake-up; None: it has none
    tenant_wait: float = 0.0  # seconds until its tenant's delivery rate lets a start be taken
