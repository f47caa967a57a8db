from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from app.core.fields import TextRule

TRIGGER_RULE = TextRule(
    r"^[A-Za-z0-9_.:\-]{1,100}$", "must be 1-100 characters: letters, digits and _ . : -"
)


class ReconcileRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    trigger: Annotated[str, TRIGGER_RULE] = Field(
        default="api", description="Who asked: e.g. cron, dev-timer, an operator's name."
    )


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
        description="What the run did: streams_checked, streams_mended (repairs), "
        "destinations_checked, destinations_armed (repairs) and unpublished_outbox; "
        "partitions_made (the days ahead made now), partitions_remade (empty days of events "
        "ahead made again for the payload classes tenants' settings call for); and "
        "retention's: dropped_days (days of "
        "deliveries dropped whole, with their events, attempts and custody records), "
        "dropped_payload_classes (a day's payloads past the days their tenants keep them, "
        "dropped as a table while the day's records stay), and rows "
        "purged one by one: purged_deliveries, purged_events, purged_keys, purged_runs, "
        "purged_portal_sessions, purged_audit_records (past HERALD_AUDIT_RETENTION_DAYS), "
        "purged_transformations (versions of endpoints' transformations no delivery is sent "
        "as)."
    )
    error: str | None
    started_at: datetime
    finished_at: datetime | None
