"""The arq jobs behind `POST /v1/reconcile` and `POST /v1/deliveries/redrive`: each starts its
work in the worker's background and returns at once."""

from __future__ import annotations

import asyncio
from typing import Any

from app.services.reconcile import run_reconcile
from app.services.redrive import run_bulk_redrive


async def reconcile(ctx: dict[str, Any], run_id: str) -> None:
    """The run goes on in the background. arq has one in-progress timeout for all functions
    (the longest function timeout + 10 s), and it decides how soon a dead worker's jobs can run
    again; a run bounded by rows rather than seconds must not stretch it."""
    background: set[asyncio.Task[None]] = ctx["background"]
    task = asyncio.create_task(
        run_reconcile(ctx["settings"], ctx["sessionmaker"], ctx["redis_queue"], run_id),
        name=f"reconcile-{run_id}",
    )
    background.add(task)
    task.add_done_callback(background.discard)


async def bulk_redrive(ctx: dict[str, Any], job_id: str) -> None:
    background: set[asyncio.Task[None]] = ctx["background"]
    task = asyncio.create_task(
        run_bulk_redrive(ctx["settings"], ctx["sessionmaker"], ctx["redis_queue"], job_id),
        name=f"redrive-{job_id}",
    )
    background.add(task)
    task.add_done_callback(background.discard)
