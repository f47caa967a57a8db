from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class ReconcileRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    trigger: str = Field(
        default="api", min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.:\-]+$",
        description="Who asked: e.g. cron, dev-timer, an operator's name.",
    )  # fmt: skip


class ReconcileAccepted(BaseModel):
    run_id: str
    status: str


class ReconcileRunOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    run_id: str = Field(validation_alias="id")
    region: str
    trigger: str
    status: str = Field(description="queued | running | succeeded | failed")
    counts: dict[str, int] = Field(
        description="Rows brought back per category: lease_expirations, stale_enqueued, "
        "due_pending, unpublished_outbox; and rows purged by retention: purged_deliveries, "
        "purged_events, purged_keys, purged_runs."
    )
    error: str | None
    started_at: datetime
    finished_at: datetime | None
