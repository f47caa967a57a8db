"""What the API answers about an endpoint: the endpoint as shown (credentials never), its
secrets shown once, a test event's report and its delivery statistics."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.endpoints.schemas.credentials import EgressProxyOut, OAuth2Out
from app.endpoints.schemas.tls import ClientTLSOut, shown
from app.models import Endpoint


def current_pause(endpoint: Endpoint) -> dict[str, Any]:
    """``paused_until`` and ``pause_reason`` as they stand now: a pause that has ended (by the
    database clock) is no pause at all."""
    if endpoint.pause_in_force:
        return {"paused_until": endpoint.paused_until, "pause_reason": endpoint.pause_reason}
    return {"paused_until": None, "pause_reason": None}


class EndpointOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    delivery: str = Field(description="`push` (sent to `url`) or `poll` (read by its receiver).")
    url: str | None = Field(description="Where deliveries are sent; null: a polling endpoint.")
    customer_id: str | None = Field(description="The customer it belongs to; null: none.")
    description: str | None
    event_types: list[str] | None
    operational: bool = Field(
        description="Subscribed to Herald's own events (herald.*): its own deliveries tell of "
        "nothing, so that no operational event can feed another."
    )
    rate_limit_per_second: float | None
    max_in_flight: int | None
    enabled: bool
    disabled_reason: str | None
    payload_format: str
    signature_schemes: list[str]
    public_key: str | None = Field(
        description="The ed25519 public key (`whpk_...`) a receiver verifies `v1a` signatures "
        "with; not secret."
    )
    previous_public_key: str | None = Field(
        description="After a rotation of the key pair: the previous public key, whose "
        "signatures attempts carry as well until `previous_public_key_expires_at`."
    )
    previous_public_key_expires_at: datetime | None
    headers: dict[str, str]
    oauth2: OAuth2Out | None = Field(description="OAuth2 client credentials, less the secret.")
    tls: ClientTLSOut | None = Field(description="Mutual TLS and the receiver's CA, less the key.")
    egress_proxy: EgressProxyOut | None = Field(description="The endpoint's own egress proxy.")
    webhook_handshake: bool = Field(
        description="Whether the receiver's consent (the CloudEvents webhook handshake) is "
        "required: it was given, or the endpoint would not have been saved."
    )
    webhook_origin: str | None = Field(description="The origin the receiver consented to.")
    webhook_allowed_rate_per_minute: int | None = Field(
        description="The rate the receiver allowed (a ceiling beside the endpoint's own); "
        "null: none (`*`)."
    )
    webhook_validated_at: datetime | None
    secret_header_names: list[str] = Field(
        description="The secret static headers set, by name: their values are never shown."
    )
    filter: str | None
    transformation: str | None
    ordering: str
    on_dead: str
    final_statuses: list[int] = Field(
        description="Statuses that end a delivery at once besides the default ones."
    )
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
                "previous_public_key_expires_at": value.previous_signing_key_expires_at,
                "tls": shown(value.tls, value.previous_tls, value.previous_tls_expires_at),
                "webhook_handshake": value.webhook_origin is not None,
                "webhook_allowed_rate_per_minute": value.webhook_allowed_rate,
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


class RotatedSigningKey(BaseModel):
    public_key: str = Field(description="The new public key; it signs every v1a from now.")
    previous_public_key_expires_at: datetime | None = Field(
        description="Until then attempts carry a v1a signature with the previous key as well."
    )


class EndpointTestStep(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    step: Literal["destination", "proxy", "tls", "oauth2", "signature", "request"]
    outcome: Literal["ok", "failed", "skipped"]
    detail: str


class EndpointTestReport(BaseModel):
    """What one test event met on its way, step by step; nothing of it is stored."""

    model_config = ConfigDict(from_attributes=True)

    delivered: bool = Field(description="The receiver answered 2xx.")
    status_code: int | None
    duration_ms: int | None
    response_body: str | None = Field(description="The first 4 KiB of the answer.")
    steps: list[EndpointTestStep]


class WindowStats(BaseModel):
    attempts: int
    successes: int
    failures: int
    success_rate: float | None = Field(description="successes / attempts; null without attempts")
    p95_ms: float | None = Field(
        description="95th percentile of the attempts' durations in milliseconds; null without "
        "attempts"
    )


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
