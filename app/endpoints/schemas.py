from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from app.models import Endpoint
from app.schemas import PRINTABLE_RULE, EventTypeSelector, TextRule

URL_RULE = TextRule(
    r"^[^\x00-\x20\x7f]+$",
    "must be an absolute http(s) URL without spaces or control characters (encode a space as %20)",
)
EndpointUrl = Annotated[str, StringConstraints(min_length=1, max_length=2048), URL_RULE]
Description = Annotated[str, StringConstraints(max_length=1000), PRINTABLE_RULE]


class EndpointCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "url": "https://hooks.example.com/herald",
                    "description": "billing events",
                    "event_types": ["invoice.paid", "invoice.refunded"],
                    "max_in_flight": 10,
                }
            ]
        },
    )

    url: EndpointUrl
    description: Description | None = None
    event_types: list[EventTypeSelector] | None = Field(
        default=None,
        max_length=100,
        description="Event types to receive, matched exactly (no wildcards); null receives all.",
    )
    rate_limit_per_second: float | None = Field(default=None, gt=0, le=100_000)
    max_in_flight: int | None = Field(default=None, gt=0, le=10_000)
    enabled: bool = True


class EndpointUpdate(BaseModel):
    """Fields to change; fields left out stay as they are, explicit nulls clear them."""

    model_config = ConfigDict(extra="forbid")

    url: EndpointUrl | None = None
    description: Description | None = None
    event_types: list[EventTypeSelector] | None = Field(default=None, max_length=100)
    rate_limit_per_second: float | None = Field(default=None, gt=0, le=100_000)
    max_in_flight: int | None = Field(default=None, gt=0, le=10_000)
    enabled: bool | None = None


def current_pause(endpoint: Endpoint) -> dict[str, Any]:
    """``paused_until`` and ``pause_reason`` as they stand now: a pause that has ended (by the
    database clock) is no pause at all."""
    if endpoint.pause_in_force:
        return {"paused_until": endpoint.paused_until, "pause_reason": endpoint.pause_reason}
    return {"paused_until": None, "pause_reason": None}


class EndpointOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    url: str
    description: str | None
    event_types: list[str] | None
    rate_limit_per_second: float | None
    max_in_flight: int | None
    enabled: bool
    disabled_reason: str | None
    paused_until: datetime | None = Field(
        description="No attempt starts before this: a receiver's Retry-After or the circuit "
        "breaker's cool-down."
    )
    pause_reason: str | None
    consecutive_failures: int
    circuit: str = Field(description="closed | open (cooling down or probing)")
    created_at: datetime
    updated_at: datetime

    @model_validator(mode="before")
    @classmethod
    def _from_row(cls, value: Any) -> Any:
        if hasattr(value, "breaker_trips"):
            return {
                **{name: getattr(value, name) for name in cls.model_fields if hasattr(value, name)},
                **current_pause(value),
                "circuit": "open" if value.breaker_trips > 0 else "closed",
            }
        return value


class EndpointCreated(EndpointOut):
    secret: str = Field(description="Signing secret (Standard Webhooks, whsec_...).")


class EndpointSecret(BaseModel):
    secret: str


class RotatedSecret(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    secret: str = Field(description="The new signing secret; it signs every attempt from now.")
    previous_secret_expires_at: datetime | None = Field(
        description="Until then attempts carry a signature with the previous secret as well."
    )


class WindowStats(BaseModel):
    attempts: int
    successes: int
    failures: int
    success_rate: float | None = Field(description="successes / attempts; null without attempts")


class EndpointStats(BaseModel):
    endpoint_id: str
    last_hour: WindowStats
    last_day: WindowStats
    last_success_at: datetime | None
    last_failure_at: datetime | None
    consecutive_failures: int
    circuit: str
    paused_until: datetime | None
    pause_reason: str | None
    enabled: bool
    disabled_reason: str | None
