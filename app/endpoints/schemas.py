from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)
from pydantic_core import PydanticCustomError

from app.models import Endpoint
from app.schemas import PRINTABLE_RULE, EventTypeSelector, TextRule

URL_RULE = TextRule(
    r"^[^\x00-\x20\x7f]+$",
    "must be an absolute http(s) URL without spaces or control characters (encode a space as %20)",
)
EndpointUrl = Annotated[str, StringConstraints(min_length=1, max_length=2048), URL_RULE]
Description = Annotated[str, StringConstraints(max_length=1000), PRINTABLE_RULE]

PayloadFormat = Literal["raw", "standard", "cloudevents", "cloudevents-binary"]
_PAYLOAD_FORMAT = (
    "The request body: `raw`, the payload as accepted; `standard`, the Standard Webhooks "
    'envelope `{"type": <event type>, "timestamp": <event time>, "data": <payload>}`; '
    "`cloudevents`, a CloudEvent 1.0 in structured mode (`application/cloudevents+json`: "
    "`id` the event's id, `source` `urn:herald:tenant:<tenant id>`, `type`, `time`, `data` the "
    "payload); or `cloudevents-binary`, the payload as the body with those attributes in "
    "`ce-*` headers (the CloudEvents HTTP binding). The signature covers exactly the bytes sent."
)

SignatureScheme = Literal["v1", "v1a"]


def _once_each(schemes: list[str]) -> list[str]:
    if len(set(schemes)) != len(schemes):
        raise PydanticCustomError("schemes", "give each scheme once")
    return schemes


def _v1_only() -> list[SignatureScheme]:
    return ["v1"]


SignatureSchemes = Annotated[list[SignatureScheme], Field(min_length=1), AfterValidator(_once_each)]
_SIGNATURE_SCHEMES = (
    "The Standard Webhooks signatures every attempt carries in `webhook-signature`: `v1` "
    "(HMAC-SHA256 with the endpoint's secret), `v1a` (ed25519: the receiver verifies with "
    "`public_key` and holds nothing secret), or both."
)

# Headers a static header may not set: the connection's framing and hop-by-hop headers, and
# what Herald sets on every attempt (the body's type, the idempotency key, the signature).
_FRAMING = {
    "host", "content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer",
    "upgrade", "expect", "proxy-connection", "proxy-authorization", "proxy-authenticate",
    "content-encoding",
}  # fmt: skip
_HERALDS = {"content-type", "idempotency-key", "user-agent"}
# Herald's own header families: Standard Webhooks', Herald's, and the CloudEvents attributes.
_HERALD_PREFIXES = ("webhook-", "herald-", "ce-")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")  # an RFC 9110 token
_HEADER_VALUE = re.compile(r"^[\t\x20-\x7e]{0,1000}$")
MAX_HEADERS = 20
MAX_HEADER_BYTES = 8 * 1024
_NAME_RULE = "a header name must be 1-100 letters, digits or !#$%&'*+.^_`|~- (one is not)"


def _value_rule(name: str) -> str:
    return (
        f"the value of the header {name} must be printable ASCII (tab allowed), at most 1000 "
        "characters"
    )


def header_fault(headers: Mapping[str, object]) -> str | None:
    """Why ``headers`` are not HTTP header fields at all (a name that is no token, a value with
    a line break or other control character, a value that is no text), or None. The syntax of
    the save rule below, which every send checks again: a row saved before the rule held the
    whole string (or by hand) can hold what no request may carry."""
    for name, value in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            return _NAME_RULE
        if not isinstance(value, str) or not _HEADER_VALUE.fullmatch(value):
            return _value_rule(name)
    return None


def combined_header_fault(headers: Mapping[str, str]) -> str | None:
    """Why ``headers`` may not be an endpoint's static headers -- what would break the protocol
    or the signature, or is no header at all -- naming the header, never echoing a value (it may
    be a credential); None when they may. The plain and the secret ones are held to it together."""
    if len(headers) > MAX_HEADERS:
        return f"at most {MAX_HEADERS} headers per endpoint, secret ones included"
    if sum(len(name) + len(value) for name, value in headers.items()) > MAX_HEADER_BYTES:
        return f"the headers may hold at most {MAX_HEADER_BYTES} bytes in all"
    seen: set[str] = set()
    for name, value in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            return _NAME_RULE
        lower = name.lower()
        if lower in seen:
            return f"the header {name} is given twice (header names ignore case)"
        seen.add(lower)
        if lower in _FRAMING:
            return f"the header {name} belongs to the connection: it cannot be set"
        if lower in _HERALDS or lower.startswith(_HERALD_PREFIXES):
            return f"the header {name} is set by Herald on every attempt: it cannot be set"
        if not _HEADER_VALUE.fullmatch(value):
            return _value_rule(name)
    return None


def _vet_headers(headers: dict[str, str]) -> dict[str, str]:
    fault = combined_header_fault(headers)
    if fault is not None:
        raise PydanticCustomError("header", fault)
    return headers


EndpointHeaders = Annotated[dict[str, str], AfterValidator(_vet_headers)]


def _compiles(expression: str) -> str:
    # Imported here: the worker reads these models (the header rules) but never compiles a
    # filter, and CEL's runtime is a 50 MB library -- the API loads it with its first filter.
    from app.programs import filters

    try:
        filters.compiled(expression)
    except filters.FilterError as exc:
        raise PydanticCustomError("filter", str(exc)) from None
    return expression


EndpointFilter = Annotated[str, StringConstraints(min_length=1), AfterValidator(_compiles)]
_FILTER = (
    "A Common Expression Language expression over the event -- `type` and `payload` -- that "
    "must be true for it to be delivered here, e.g. `payload.amount > 100 && payload.currency == "
    '"EUR"`. Checked when saved; an event it fails on (a missing field) is not delivered. '
    "`GET /v1/events/{id}` lists the endpoints a filter passed by."
)
_HEADERS = (
    f"Static headers sent on every attempt (at most {MAX_HEADERS}), for example a receiver's "
    "own authorization. Connection and framing headers, `Content-Type`, `User-Agent`, "
    "`Idempotency-Key`, `webhook-*`, `Herald-*` and `ce-*` are Herald's and are refused."
)
_CREDENTIAL_HEADERS = (
    "Static headers whose values are credentials (an `Authorization`, an API key): sent on "
    "every attempt like `headers`, under the same rules and limits counted together, but "
    "sealed at rest and never shown again -- reads list their names only "
    "(`secret_header_names`)."
)

Ordering = Literal["none", "endpoint", "key"]
OnDead = Literal["halt", "skip"]
_ORDERING = (
    "Ordered delivery: `none` (any order, the fastest), `endpoint` (one stream: each delivery "
    "starts only once the one accepted before it has succeeded, died or been cancelled) or "
    "`key` (one stream per `ordering_key` of the intent or event; intents without one share a "
    "stream). Streams proceed side by side up to the endpoint's ceilings. Each ordered "
    "delivery carries its number in `Herald-Stream-Sequence` (and its key in "
    "`Herald-Ordering-Key`)."
)
_ORDERING_CHANGE = (
    f"{_ORDERING} From `none`, ordering applies to deliveries accepted from then on; back to "
    "`none` releases every stream (what waits becomes due, in no order); between `endpoint` "
    "and `key` is refused while ordered deliveries are still live."
)
_ON_DEAD = (
    "What an ordered stream does when its head dies: `halt` (the default: the stream waits "
    "until an operator redrives or skips the dead delivery) or `skip` (it moves on). "
    "Changing it to `skip` releases the halted streams."
)


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
        description="Event types to receive: exact types, families (`order.*`: order.paid, "
        "order.item.shipped; not orders.x) or `*`; null receives all.",
    )
    rate_limit_per_second: float | None = Field(default=None, gt=0, le=100_000)
    max_in_flight: int | None = Field(default=None, gt=0, le=10_000)
    enabled: bool = True
    payload_format: PayloadFormat = Field(default="raw", description=_PAYLOAD_FORMAT)
    signature_schemes: SignatureSchemes = Field(
        default_factory=_v1_only, description=_SIGNATURE_SCHEMES
    )
    headers: EndpointHeaders = Field(default_factory=dict, description=_HEADERS)
    secret_headers: EndpointHeaders = Field(default_factory=dict, description=_CREDENTIAL_HEADERS)
    filter: EndpointFilter | None = Field(default=None, description=_FILTER)
    ordering: Ordering = Field(default="none", description=_ORDERING)
    on_dead: OnDead = Field(default="halt", description=_ON_DEAD)


class EndpointUpdate(BaseModel):
    """Fields to change; fields left out stay as they are, explicit nulls clear them."""

    model_config = ConfigDict(extra="forbid")

    url: EndpointUrl | None = None
    description: Description | None = None
    event_types: list[EventTypeSelector] | None = Field(default=None, max_length=100)
    rate_limit_per_second: float | None = Field(default=None, gt=0, le=100_000)
    max_in_flight: int | None = Field(default=None, gt=0, le=10_000)
    enabled: bool | None = None
    payload_format: PayloadFormat | None = Field(default=None, description=_PAYLOAD_FORMAT)
    signature_schemes: SignatureSchemes | None = Field(default=None, description=_SIGNATURE_SCHEMES)
    headers: EndpointHeaders | None = Field(
        default=None, description="Replaces all the static headers; null clears them."
    )
    secret_headers: EndpointHeaders | None = Field(
        default=None,
        description="Replaces all the secret static headers; null clears them. "
        + _CREDENTIAL_HEADERS,
    )
    filter: EndpointFilter | None = Field(default=None, description="null removes the filter.")
    ordering: Ordering | None = Field(default=None, description=_ORDERING_CHANGE)
    on_dead: OnDead | None = Field(default=None, description=_ON_DEAD)


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
    secret_header_names: list[str] = Field(
        description="The secret static headers set, by name: their values are never shown."
    )
    filter: str | None
    ordering: str
    on_dead: str
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
