"""The arq job behind `POST /v1/reconcile`: a thin shell around the reconciler."""

from __future__ import annotations

from typing import Any

from app.services.reconcile import run_reconcile


async def reconcile(ctx: dict[str, Any], run_id: str) -> None:
    await run_reconcile(ctx["settings"], ctx["sessionmaker"], ctx["redis_queue"], run_id)
