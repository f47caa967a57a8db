"""The loop every relay of a worker runs (the outbox's, the operational signals'): a page at a
time until told to stop -- at once again after a full page, else every interval -- and, while
a page fails, backing off up to a few seconds, with the failure logged once and the recovery
once, so a database that is away for an hour writes two lines, not thousands."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import structlog

MAX_BACKOFF_SECONDS = 5.0


async def run_pages(
    page: Callable[[], Awaitable[int]],
    *,
    page_size: int,
    interval: float,
    stop: asyncio.Event,
    log: structlog.stdlib.BoundLogger,
    name: str,
) -> None:
    """Run ``page`` (which returns how many it handled) until ``stop`` is set; ``name`` is the
    prefix of its log events (``<name>.failing``, ``<name>.recovered``)."""
    failing = False
    while not stop.is_set():
        delay = interval
        try:
            handled = await page()
            if failing:
                log.info(f"{name}.recovered")
                failing = False
            if handled == page_size:
                delay = 0  # a full page: there is probably more
        except Exception as exc:
            if not failing:
                log.warning(f"{name}.failing", error=type(exc).__name__)
                failing = True
            delay = min(MAX_BACKOFF_SECONDS, delay * 4)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)
