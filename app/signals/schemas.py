"""The payloads of Herald's own events: what each operational event tells, as its JSON Schema
in the catalogue says. The triggers of migration 0045 and the endpoints service write them;
these models are their contract (a test holds every payload received to its schema)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field


class EndpointSubject(BaseModel):
    """The endpoint an operational event is about."""

    endpoint_id: str
    customer_id: str | None = Field(description="The customer it belongs to; null: the tenant's.")
    url: str | None = Field(description="Where it is sent; null: a polling endpoint's.")
    occurred_at: datetime = Field(description="When it happened, by the database's clock.")


class EndpointCreated(EndpointSubject):
    description: str | None
    event_types: list[str] | None = Field(description="What it subscribes to; null: everything.")
    enabled: bool


class EndpointUpdated(EndpointSubject):
    changed: list[str] = Field(
        description="The fields the change set (a secret's name, never its value)."
    )


class EndpointDeleted(EndpointSubject):
    pass


class EndpointDisabled(EndpointSubject):
    reason: str | None = Field(
        description="Why: 'disabled by user', 'receiver answered 410 Gone', or 'no successful "
        "delivery for N hours'."
    )


class EndpointEnabled(EndpointSubject):
    pass


class EndpointFailing(EndpointSubject):
    consecutive_failures: int = Field(
        description="Failures in a row: the tenant's failing_after (GET /v1/tenant)."
    )
    failing_since: datetime


class EndpointRecovered(EndpointSubject):
    failures: int = Field(description="How many failures in a row the success ended.")
    failing_since: datetime | None


class DeliveryDead(EndpointSubject):
    delivery_id: str
    event_id: str
    event_type: str
    state: Literal["dead", "cancelled"]
    reason: str = Field(
        description="Why it ended: its attempts ran out, its receiver refused it, 'cancelled'."
    )
    attempts: int
    last_status_code: int | None


class StreamHalted(EndpointSubject):
    stream: str = Field(description="The ordering key ('' for the endpoint's one stream).")
    head_delivery_id: str | None = Field(description="The dead delivery it waits behind.")


class OperationalEventTypeOut(BaseModel):
    """One of Herald's own event types, as the catalogue shows it."""

    name: str
    description: str
    schema_: dict[str, Any] = Field(
        serialization_alias="schema", description="The JSON Schema of its payload."
    )
    example: dict[str, Any]
