from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.schemas.common import EVENT_TYPE_PATTERN, PRINTABLE_PATTERN

EventType = Annotated[str, StringConstraints(pattern=EVENT_TYPE_PATTERN)]
EndpointUrl = Annotated[
    str, StringConstraints(min_length=1, max_length=2048, pattern=r"^[^\x00-\x20\x7f]+$")
]
Description = Annotated[str, StringConstraints(max_length=1000, pattern=PRINTABLE_PATTERN)]


class EndpointCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: EndpointUrl
    description: Description | None = None
    event_types: list[EventType] | None = Field(
        default=None, max_length=100, description="Event types to receive; null receives all."
    )
    rate_limit_per_second: float | None = Field(default=None, gt=0, le=100_000)
    max_in_flight: int | None = Field(default=None, gt=0, le=10_000)
    enabled: bool = True


class EndpointUpdate(BaseModel):
    """Fields to change; fields left out stay as they are, explicit nulls clear them."""

    model_config = ConfigDict(extra="forbid")

    url: EndpointUrl | None = None
    description: Description | None = None
    event_types: list[EventType] | None = Field(default=None, max_length=100)
    rate_limit_per_second: float | None = Field(default=None, gt=0, le=100_000)
    max_in_flight: int | None = Field(default=None, gt=0, le=10_000)
    enabled: bool | None = None


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
    created_at: datetime
    updated_at: datetime


class EndpointCreated(EndpointOut):
    secret: str = Field(description="Signing secret (Standard Webhooks, whsec_...).")


class EndpointSecret(BaseModel):
    secret: str
