"""Charts drawn on the server as inline SVG: no chart library, nothing fetched by the page."""

from __future__ import annotations

from dataclasses import dataclass

from app.delivery.service.endpoint_stats import MinuteCounts

# Bottom to top in each bar: what went well first, the failures stacked above it.
STACKING = ("success", "retryable", "unknown", "permanent", "blocked", "auth_failed")


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    outcome: str
    title: str  # what a pointer over it shows


@dataclass(frozen=True)
class StackedBars:
    width: int
    height: int
    bars: list[Bar]
    peak: int  # the busiest minute's attempts: the top of the scale
    totals: dict[str, int]  # by outcome, over the whole window


def stacked_bars(counts: MinuteCounts, *, width: int = 720, height: int = 140) -> StackedBars:
    """One bar a minute, oldest on the left, each stacked by outcome and scaled to the busiest
    minute."""
    minutes = counts.minutes
    per_minute = [
        sum(counts.by_outcome[o][m] for o in STACKING if o in counts.by_outcome)
        for m in range(minutes)
    ]
    peak = max(per_minute, default=0)
    slot = width / minutes
    bars = []
    for minute in range(minutes):
        bottom = float(height)
        for outcome in STACKING:
            n = counts.by_outcome.get(outcome, [0] * minutes)[minute]
            if not n:
                continue
            tall = height * n / peak
            bottom -= tall
            ago = minutes - 1 - minute
            when = "this minute" if ago == 0 else f"{ago} min ago"
            bars.append(
                Bar(minute * slot + 1, bottom, slot - 2, tall, outcome, f"{when}: {n} {outcome}")
            )
    totals = {o: sum(counts.by_outcome.get(o, [])) for o in STACKING}
    return StackedBars(width, height, bars, peak, totals)
