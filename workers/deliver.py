"""The arq job: a thin shell around the dispatcher."""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from app.services.dispatch import Dispatcher

log = structlog.get_logger("herald.worker")


async def deliver(ctx: dict[str, Any], delivery_id: str, endpoint_id: str, *_: Any) -> None:
    """Never ends in arq's failure states (design.md, invariant 8): the delivery row owns the
    retry clock, and anything left half-done is visible there to the reconciler."""
    dispatcher: Dispatcher = ctx["dispatcher"]
    try:
        await dispatcher.deliver(delivery_id, endpoint_id)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("delivery.job_failed", delivery_id=delivery_id)
