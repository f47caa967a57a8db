"""What a tenant sends to make or change an endpoint: its fields, their rules and what the API
reference says of each."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)
from pydantic_core import PydanticCustomError

from app.core.fields import (
    ONE_NAMESPACE,
    PRINTABLE_RULE,
    CustomerId,
    EventTypeSelector,
)
from app.endpoints.schemas.credentials import (
    SIGNATURE_SCHEMES_DOC,
    EgressProxySpec,
    EndpointUrl,
    OAuth2Spec,
    SignatureSchemes,
    v1_only,
)
from app.endpoints.schemas.headers import MAX_HEADERS, EndpointHeaders
from app.endpoints.schemas.programs import (
    FILTER_DOC,
    TRANSFORMATION_DOC,
    EndpointFilter,
    EndpointTransformation,
)
from app.endpoints.schemas.tls import TLS_DOC, ClientTLSSpec

Description = Annotated[str, StringConstraints(max_length=1000), PRINTABLE_RULE]
# What an endpoint receives: the tenant's event types, or Herald's own (herald.*), never both.
Subscription = Annotated[list[EventTypeSelector], ONE_NAMESPACE]

Delivery = Literal["push", "poll"]
_DELIVERY = (
    "How deliveries reach the receiver, fixed once the endpoint is made: `push` (Herald sends "
    "each to `url`) or `poll` (the receiver, which needs no URL of its own, reads them with "
    "`GET /v1/endpoints/{id}/poll` and acknowledges them with `POST "
    "/v1/endpoints/{id}/poll/ack`). A polling endpoint takes none of what reaching a URL "
    "needs: `url`, `headers`, `secret_headers`, `oauth2`, `tls`, `egress_proxy`, "
    "`webhook_handshake`, `rate_limit_per_second`, `max_in_flight`, `final_statuses`, "
    "`transformation`."
)

PayloadFormat = Literal["raw", "standard", "cloudevents", "cloudevents-binary"]
_PAYLOAD_FORMAT = (
    "The request body: `raw`, the payload as accepted; `standard`, the Standard Webhooks "
    'envelope `{"type": <event type>, "timestamp": <event time>, "data": <payload>}`; '
    "`cloudevents`, a CloudEvent 1.0 in structured mode (`application/cloudevents+json`: "
    "`id` the event's id, `source` the tenant's (`PATCH /v1/tenant`; by default "
    "`urn:herald:tenant:<tenant id>`), `type`, `time`, `data` the "
    "payload); or `cloudevents-binary`, the payload as the body with those attributes in "
    "`ce-*` headers (the CloudEvents HTTP binding). The signature covers exactly the bytes sent."
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

_OAUTH2 = (
    "OAuth2 client credentials: every attempt carries `Authorization: Bearer <token>` from the "
    "token endpoint, fetched once per worker and kept until shortly before it expires; a 401 "
    "from the receiver fetches a fresh token and sends once more. A token endpoint that fails "
    "ends the attempt `auth_failed` (retried; never held against the receiver). With it, "
    "`Authorization` is Herald's header."
)

Ordering = Literal["none", "endpoint", "key"]
OnDead = Literal["halt", "skip"]

# A status an endpoint may make final: any 4xx or 5xx but those that say "try again" (408,
# 425, 429, 503) and 410, which is final already and also disables the endpoint.
_NEVER_FINAL = frozenset({408, 410, 425, 429, 503})


def _may_be_final(status: int) -> int:
    if not 400 <= status <= 599 or status in _NEVER_FINAL:
        raise PydanticCustomError(
            "final_status",
            "must be a 4xx or 5xx status other than 408, 425, 429 and 503 (which ask for a "
            "retry) and 410 (always final)",
        )
    return status


def _no_repeats(statuses: list[int]) -> list[int]:
    return sorted(set(statuses))


FinalStatuses = Annotated[
    list[Annotated[int, AfterValidator(_may_be_final)]],
    Field(max_length=50),
    AfterValidator(_no_repeats),
]
_FINAL_STATUSES = (
    "Statuses that end a delivery at once (`dead`, not retried), besides the other 4xx that do "
    "by default. 401, 403 and 404 are retried unless listed here: a receiver answers them "
    "while it is deployed or its credentials change."
)
_EGRESS_PROXY = (
    "The endpoint's own HTTP proxy, in place of the operator's (HERALD_EGRESS_PROXY), for a "
    "receiver that admits only traffic from it. Herald vets the destination itself and asks "
    "the proxy for that address (CONNECT <address>:443 for https, the name kept in SNI, the "
    "certificate check and Host). A proxy that fails counts against the endpoint."
)

_HANDSHAKE = (
    "The CloudEvents webhook validation handshake (HTTP 1.1 Web Hooks for Event Delivery, "
    "section 4): before the endpoint is saved with a URL, Herald sends that URL an `OPTIONS` "
    "with `WebHook-Request-Origin` (HERALD_WEBHOOK_ORIGIN) and, given a rate ceiling, "
    "`WebHook-Request-Rate`; the save goes through only if the receiver answers with "
    "`WebHook-Allowed-Origin` (that origin or `*`). Its `WebHook-Allowed-Rate` (requests a "
    "minute) is a ceiling on top of the endpoint's own, and every delivery carries "
    "`WebHook-Request-Origin`. Asked again whenever the URL changes."
)

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

    delivery: Delivery = Field(default="push", description=_DELIVERY)
    url: EndpointUrl | None = Field(
        default=None,
        description="Where Herald sends the deliveries: required for a `push` endpoint, refused "
        "for a `poll` one.",
    )
    customer_id: CustomerId | None = Field(
        default=None,
        description="The tenant's customer the endpoint belongs to (PUT /v1/customers/{id} "
        "first); fixed once made. Events published to that customer reach it; events published "
        "to none reach only the endpoints that belong to none.",
    )
    description: Description | None = None
    event_types: Subscription | None = Field(
        default=None,
        max_length=100,
        description="Event types to receive: exact types, families (`order.*`: order.paid, "
        "order.item.shipped; not orders.x) or `*`; null receives all of yours. Herald's own "
        "events (`herald.*`, GET /v1/operational-event-types) are named, never mixed with "
        "yours, and go only to the tenant's own endpoints.",
    )
    rate_limit_per_second: float | None = Field(default=None, gt=0, le=100_000)
    max_in_flight: int | None = Field(default=None, gt=0, le=10_000)
    enabled: bool = True
    payload_format: PayloadFormat = Field(default="raw", description=_PAYLOAD_FORMAT)
    signature_schemes: SignatureSchemes = Field(
        default_factory=v1_only, description=SIGNATURE_SCHEMES_DOC
    )
    headers: EndpointHeaders = Field(default_factory=dict, description=_HEADERS)
    secret_headers: EndpointHeaders = Field(default_factory=dict, description=_CREDENTIAL_HEADERS)
    oauth2: OAuth2Spec | None = Field(default=None, description=_OAUTH2)
    tls: ClientTLSSpec | None = Field(default=None, description=TLS_DOC)
    egress_proxy: EgressProxySpec | None = Field(default=None, description=_EGRESS_PROXY)
    webhook_handshake: bool = Field(default=False, description=_HANDSHAKE)
    filter: EndpointFilter | None = Field(default=None, description=FILTER_DOC)
    transformation: EndpointTransformation | None = Field(
        default=None, description=TRANSFORMATION_DOC
    )
    ordering: Ordering = Field(default="none", description=_ORDERING)
    on_dead: OnDead = Field(default="halt", description=_ON_DEAD)
    final_statuses: FinalStatuses = Field(default=[], description=_FINAL_STATUSES)


# Every endpoint has one of these: a change may set them, never clear them (null is refused).
_NEVER_NULL = frozenset(
    {
        "url",
        "enabled",
        "payload_format",
        "signature_schemes",
        "webhook_handshake",
        "ordering",
        "on_dead",
    }
)


class EndpointUpdate(BaseModel):
    """Fields to change; fields left out stay as they are, explicit nulls clear them."""

    model_config = ConfigDict(extra="forbid")

    url: EndpointUrl | None = Field(
        default=None,
        description="A new URL. Credentials follow the URL they were set for: a URL on another "
        "origin (scheme, host, port) must come with `secret_headers`, `oauth2` and `tls` stated "
        "again or null, or it is refused (422); a customer moving its URL through the portal "
        "removes them.",
    )
    description: Description | None = None
    event_types: Subscription | None = Field(default=None, max_length=100)
    rate_limit_per_second: float | None = Field(default=None, gt=0, le=100_000)
    max_in_flight: int | None = Field(default=None, gt=0, le=10_000)
    enabled: bool | None = None
    payload_format: PayloadFormat | None = Field(default=None, description=_PAYLOAD_FORMAT)
    signature_schemes: SignatureSchemes | None = Field(
        default=None, description=SIGNATURE_SCHEMES_DOC
    )
    headers: EndpointHeaders | None = Field(
        default=None, description="Replaces all the static headers; null clears them."
    )
    secret_headers: EndpointHeaders | None = Field(
        default=None,
        description="Replaces all the secret static headers; null clears them. "
        + _CREDENTIAL_HEADERS,
    )
    oauth2: OAuth2Spec | None = Field(
        default=None, description=f"{_OAUTH2} Replaced whole (the secret too); null removes it."
    )
    tls: ClientTLSSpec | None = Field(
        default=None,
        description=f"{TLS_DOC} Replaced whole (the key too); the material it replaces stays a "
        "fallback for `overlap_hours`. null removes it, fallback and all.",
    )
    egress_proxy: EgressProxySpec | None = Field(
        default=None, description=f"{_EGRESS_PROXY} null: the operator's proxy, or none."
    )
    webhook_handshake: bool | None = Field(
        default=None,
        description=f"{_HANDSHAKE} `true` asks the receiver again (its allowed rate may have "
        "changed); `false` stops requiring it.",
    )
    filter: EndpointFilter | None = Field(default=None, description="null removes the filter.")
    transformation: EndpointTransformation | None = Field(
        default=None,
        description=f"{TRANSFORMATION_DOC} Deliveries accepted before the change keep theirs; "
        "null removes it.",
    )
    ordering: Ordering | None = Field(default=None, description=_ORDERING_CHANGE)
    on_dead: OnDead | None = Field(default=None, description=_ON_DEAD)
    final_statuses: FinalStatuses | None = Field(
        default=None, description=f"{_FINAL_STATUSES} null: none."
    )

    @field_validator("final_statuses", mode="after")
    @classmethod
    def _none_is_empty(cls, value: list[int] | None) -> list[int]:
        return value or []

    @field_validator(*sorted(_NEVER_NULL), mode="before")
    @classmethod
    def _not_null(cls, value: object) -> object:
        if value is None:
            raise PydanticCustomError(
                "not_null",
                "cannot be null: every endpoint has one; leave it out to keep it as it is",
            )
        return value

    def sent(self, name: str) -> bool:
        """Whether the change says what becomes of the field ``name``. Each field is one of
        three things, as in Svix's patch types: left out, it stays as it is (False); null
        clears it (refused for what every endpoint has: a URL, a payload format...); a value
        sets it."""
        if name not in type(self).model_fields:
            raise KeyError(name)
        return name in self.model_fields_set
