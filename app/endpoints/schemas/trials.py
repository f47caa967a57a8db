"""Trying a transformation before it is saved: the event it is tried on, and what it made."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.fields import EventType
from app.endpoints.schemas.programs import EndpointTransformation


class TransformationTrial(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "transformation": '{"body": {"text": "Order " + payload.id + " paid"}}',
                    "event_type": "order.paid",
                }
            ]
        },
    )

    transformation: EndpointTransformation | None = Field(
        default=None,
        description="The transformation to try (checked as a save checks it); null: the "
        "endpoint's own.",
    )
    event_type: EventType = Field(
        description="A type in the catalogue: its example payload is the event tried, unless "
        "`payload` is given."
    )
    payload: dict[str, Any] | None = Field(
        default=None, description="The payload to try it on, instead of the type's example."
    )


class TrialRequest(BaseModel):
    url: str = Field(description="Where the request would go: the endpoint's URL, extended.")
    headers: dict[str, str] = Field(
        description="The headers the transformation adds (Herald's own and the endpoint's "
        "static ones are sent besides)."
    )
    body: Any = Field(
        description="The JSON body it made; null when it makes none (`body_made` false): the "
        "endpoint's own body is sent, the payload as its payload_format sends it."
    )
    body_made: bool


class TransformationTrialOut(BaseModel):
    event_type: str
    payload: dict[str, Any] = Field(description="The payload it was tried on.")
    outcome: Literal["sent", "skipped", "failed"] = Field(
        description="`sent`: a delivery of this event would send `request`; `skipped`: it "
        "would end `cancelled`, nothing sent; `failed`: it would end `dead`, for `error`."
    )
    request: TrialRequest | None
    error: str | None = Field(description="Why it makes no request of this event, in words.")
    bound_steps: int | None = Field(
        description="The most steps it could take on this event (its budget is "
        "2,000,000, about 2 ms); null when it was not run."
    )
