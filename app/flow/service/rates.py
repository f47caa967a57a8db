"""The start rate's arithmetic, pure: the interval between starts, how far ahead a grant
schedules them, how late after its slot a start may still begin, and the burst that makes. The
gate (gate.py) hands out the slots; a worker's attempt (engine/service/attempt_runs.py) keeps to
the window each grant gives it."""

from __future__ import annotations

import math

# Slower than one start in 35 years counts as one start in 35 years: it keeps every time in
# the scripts under 2**53 µs, where doubles are exact.
MAX_INTERVAL_US = 2**50

# A batch grant schedules starts up to this far ahead on the rate ceiling: enough to keep a
# fast destination busy between two grants, short enough that a batch is soon sent.
RATE_HORIZON_US = 1_000_000

# However short the interval, a start may begin this late after its slot: an event loop is
# never more punctual than that, and a stricter rule would give back most starts.
LATE_START_FLOOR_SECONDS = 0.02


def start_interval_us(rate_per_second: float) -> int:
    """Whole microseconds between starts at ``rate_per_second`` (0: no ceiling). Rounded up,
    so the rate is never exceeded: at most one microsecond per start slower than asked."""
    if rate_per_second <= 0:
        return 0
    return min(math.ceil(1_000_000 / rate_per_second), MAX_INTERVAL_US)


def late_start_allowed(interval: float) -> float:
    """How long after its slot a start ``interval`` seconds from the next may still begin:
    half an interval, and never less than LATE_START_FLOOR_SECONDS. Less than a whole
    interval, so that a late start cannot land on the next one's slot; the half left over is
    room for the way to the receiver."""
    return max(LATE_START_FLOOR_SECONDS, interval / 2)


def start_burst(interval: float) -> float:
    """The burst B of a rate ceiling with starts ``interval`` seconds apart (R = 1/interval):
    at most floor(R·W + B) starts begin in any window of W seconds. Slots are a whole
    interval apart on Redis's clock, across grants too, and each start begins within
    ``late_start_allowed`` of its slot, so B = 1 + allowed/interval = max(1.5, 1 + R/50).
    Below 50/s that is R·W + 1 in any window where R·W is whole (21 in any second at 20/s);
    at 1000/s, B = 21."""
    return 1 + late_start_allowed(interval) / interval
