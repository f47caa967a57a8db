from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

_ACTOR = (
    "Who made the change: `kind` api_key (a tenant key), admin (an admin key; id null for the "
    "configured one), portal_session (a customer's portal), console (a console sign-in, by "
    "its session) or cli (the `herald` command); `id` the key's, session's or sign-in's id."
)


class ActorOut(BaseModel):
    kind: str
    id: str | None


class AuditRecordOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    action: str = Field(description="What was done: endpoint.updated, api_key.revoked, ...")
    subject_id: str | None = Field(
        description="What it was done to: an endpoint's id, a key's, a customer's, an event "
        "type's name; null for the portal's settings."
    )
    actor: ActorOut = Field(description=_ACTOR)
    before: dict[str, Any] | None = Field(
        description="The fields that changed, as they were (null for a creation). A secret "
        "is named, never shown."
    )
    after: dict[str, Any] | None = Field(
        description="The fields that changed, as they became (null for a deletion)."
    )
    created_at: datetime

    @model_validator(mode="before")
    @classmethod
    def _actor_from_row(cls, value: Any) -> Any:
        if isinstance(value, dict) or not hasattr(value, "actor_kind"):
            return value
        return {
            "id": value.id,
            "action": value.action,
            "subject_id": value.subject_id,
            "actor": {"kind": value.actor_kind, "id": value.actor_id},
            "before": value.before,
            "after": value.after,
            "created_at": value.created_at,
        }
