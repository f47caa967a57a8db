"""The arq jobs behind `POST /v1/reconcile` and `POST /v1/deliveries/redrive`: each starts its
work in the worker's background and returns at once.

In the background because arq has one in-progress timeout for all functions (the longest
function timeout + 10 s), and it decides how soon a dead worker's jobs can run again; work
bounded by rows rather than seconds must not stretch it."""

from __future__ import annotations

from typing import Any

from app.delivery.service.redrive import run_bulk_redrive
from app.reconcile.service.reconcile import run_reconcile
from workers.context import WorkerContext


async def reconcile(ctx: dict[str, Any], run_id: str) -> None:
    herald = WorkerContext.of(ctx)
    herald.in_background(
        run_reconcile(herald.settings, herald.sessionmaker, herald.redis, run_id),
        name=f"reconcile-{run_id}",
    )


async def bulk_redrive(ctx: dict[str, Any], job_id: str) -> None:
    herald = WorkerContext.of(ctx)
    herald.in_background(
        run_bulk_redrive(herald.settings, herald.sessionmaker, herald.redis, job_id),
        name=f"redrive-{job_id}",
    )
