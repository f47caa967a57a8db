"""A worker's liveness, for its container's health check: the worker's own event loop touches a
file every few seconds; ``herald worker --check`` (run in the same container) says whether that
happened lately. It proves the loop that runs the pump is alive -- not merely the process, as
a metrics port (served from a thread) would -- and needs no network. A clean stop removes the
file: a stopped worker is not healthy."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

BEAT_SECONDS = 5.0
# A beat may be late by a loaded machine's scheduling; three missed beats are not.
STALE_AFTER_SECONDS = 3 * BEAT_SECONDS


async def beat(path: Path, stop: asyncio.Event) -> None:
    try:
        while not stop.is_set():
            # On the loop itself, on purpose: the beat proves this loop runs (a local file's
            # mtime, microseconds).
            path.touch()  # noqa: ASYNC240
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), BEAT_SECONDS)
    finally:
        path.unlink(missing_ok=True)  # noqa: ASYNC240


def check(path: Path) -> tuple[bool, str]:
    """(healthy, what to say)."""
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return False, f"no heartbeat at {path}: the worker is not running (or stopped cleanly)"
    if age > STALE_AFTER_SECONDS:
        return False, f"the worker's last heartbeat is {age:.0f} s old: its event loop is stuck"
    return True, f"the worker beat {age:.1f} s ago"
