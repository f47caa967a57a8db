"""What Herald answers, as typed models. Each mirrors one schema of Herald's OpenAPI document
(``OPENAPI_NAMES``); Herald's test suite fails if a field is added, dropped or made optional
there and not here. Unknown fields are kept, not refused: a newer Herald stays readable."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

Item = TypeVar("Item")
DeliveryState = Literal["pending", "enqueued", "leased", "succeeded", "dead", "cancelled"]
Outcome = Literal["success", "retryable", "unknown", "permanent", "blocked"]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class Delivery(_Answer):
    id: str
    endpoint_id: str
    event_id: str
    event_type: str
    state: DeliveryState
    attempt_count: int
    # None while an ordered delivery waits behind its stream's head.
    next_attempt_at: datetime | None
    lease_until: datetime | None
    last_outcome: Outcome | None
    last_status_code: int | None
    dead_reason: str | None
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None
    ordering_key: str | None
    stream_seq: int | None  # its number in its stream (ordered endpoints)
    # When its event's payload is dropped (the tenant's payload retention); None: kept as
    # long as this record.
    payload_expires_at: datetime | None


class CustodyEvent(_Answer):
    at: datetime
    event: str
    detail: str | None


class DeliveryDetail(Delivery):
    waiting_reason: str
    waiting_detail: str | None
    timeline: list[CustodyEvent]
    waiting_behind: str | None = None  # the delivery an ordered one waits behind
    halts_its_stream: bool = False  # a dead head: redrive or skip it
    payload_expired: bool = False  # past payload_expires_at: not shown, not redriven


class Attempt(_Answer):
    attempt_number: int
    started_at: datetime
    duration_ms: int
    status_code: int | None
    outcome: Outcome
    error: str | None
    response_body: str | None


class FilteredOut(_Answer):
    endpoint_id: str
    reason: str


class FanoutDelivery(_Answer):
    id: str
    endpoint_id: str


class EventAccepted(_Answer):
    id: str
    event_type: str
    deliveries: list[FanoutDelivery]
    filtered_out: list[FilteredOut] = []


class EventDelivery(_Answer):
    id: str
    endpoint_id: str
    state: DeliveryState
    attempt_count: int
    last_status_code: int | None
    completed_at: datetime | None


class Event(_Answer):
    id: str
    event_type: str
    payload: dict[str, Any] | None  # None once it expired
    payload_expires_at: datetime | None
    payload_expired: bool
    created_at: datetime
    deliveries: list[EventDelivery]
    filtered_out: list[FilteredOut]


class OAuth2(_Answer):
    token_url: str
    client_id: str
    scope: str | None
    audience: str | None


class Certificate(_Answer):
    subject: str
    issuer: str
    serial_number: str
    not_before: datetime
    not_after: datetime
    sha256_fingerprint: str


class CABundle(_Answer):
    certificates: int
    subjects: list[str]


class ClientTLS(_Answer):
    """An endpoint's TLS material as shown: what identifies it, never the key."""

    client_certificate: Certificate | None
    ca_bundle: CABundle | None  # None: the receiver is checked against the system's CAs
    # After a replacement, until previous_expires_at: the fallback when the new is refused.
    previous_client_certificate: Certificate | None
    previous_expires_at: datetime | None


class EgressProxy(_Answer):
    url: str  # less its credentials
    credentials: bool  # whether it is given a user and password (sealed, never shown)


class Endpoint(_Answer):
    id: str
    delivery: str  # push (sent to url) | poll (read by its receiver: no url)
    url: str | None
    customer_id: str | None  # the tenant's customer it belongs to
    description: str | None
    event_types: list[str] | None
    # Subscribed to Herald's own events (herald.*): its own deliveries tell of nothing.
    operational: bool
    filter: str | None
    transformation: str | None
    rate_limit_per_second: float | None
    max_in_flight: int | None
    enabled: bool
    disabled_reason: str | None
    payload_format: str  # raw | standard | cloudevents | cloudevents-binary
    signature_schemes: list[str]  # v1 (HMAC), v1a (ed25519)
    public_key: str | None  # whpk_...: verifies v1a signatures
    previous_public_key: str | None
    previous_public_key_expires_at: datetime | None
    headers: dict[str, str]
    oauth2: OAuth2 | None  # client credentials, less the secret
    tls: ClientTLS | None  # mutual TLS and the receiver's own CA, less the key
    egress_proxy: EgressProxy | None  # the endpoint's own proxy, in place of the operator's
    # The CloudEvents webhook handshake: required (the receiver consented to webhook_origin),
    # the rate it allowed (requests a minute, a ceiling; None: none), when.
    webhook_handshake: bool
    webhook_origin: str | None
    webhook_allowed_rate_per_minute: int | None
    webhook_validated_at: datetime | None
    # The secret static headers set, by name: their values are sealed and never shown.
    secret_header_names: list[str]
    ordering: str  # none | endpoint | key
    on_dead: str  # halt | skip: what a stream does when its head dies
    final_statuses: list[int]  # statuses that end a delivery at once besides the defaults
    paused_until: datetime | None
    pause_reason: str | None
    consecutive_failures: int
    circuit: str
    created_at: datetime
    updated_at: datetime


class EndpointCreated(Endpoint):
    secret: str


class RedriveFilter(_Answer):
    endpoint_id: str | None = None
    event_type: str | None = None
    states: list[str] = ["dead"]
    dead_after: datetime | None = None
    dead_before: datetime | None = None


class RedriveJob(_Answer):
    id: str
    status: str
    filter: RedriveFilter
    redriven: int
    more: bool  # stopped at the most one job revives, with more to go: ask again
    error: str | None
    created_at: datetime
    finished_at: datetime | None


class Stream(_Answer):
    """One ordered stream of an endpoint with work or halted (GET /v1/endpoints/{id}/streams)."""

    ordering_key: str | None  # None: the endpoint's one stream, or its deliveries without a key
    last_seq: int
    head_id: str
    head_seq: int | None
    head_state: str | None
    head_since: datetime | None
    halted_at: datetime | None  # set while a dead head halts it
    live: int  # deliveries of the stream not yet finished


class Page(_Answer, Generic[Item]):
    items: list[Item]
    next_cursor: str | None


class Problem(_Answer):
    """An RFC 9457 problem, as Herald answers every error."""

    type: str = "about:blank"
    title: str = ""
    status: int = 0
    detail: str | None = None


# Which schema of Herald's OpenAPI document each model mirrors.
class Customer(_Answer):
    id: str  # the tenant's own id for it
    name: str | None
    created_at: datetime
    updated_at: datetime


class PortalSession(_Answer):
    id: str
    customer_id: str
    capabilities: list[str]  # manage_endpoints, replay, transform_endpoints, poll_endpoints
    url: str  # opens the portal once: its one-time token is in the fragment
    link_expires_at: datetime
    expires_at: datetime


PortalSessionStatus = Literal["unopened", "open", "ended", "revoked"]


class PortalSessionListed(_Answer):
    """A portal session as listed (GET /v1/portal-sessions): no link, where it stands."""

    id: str
    customer_id: str
    capabilities: list[str]
    api_key_id: str | None  # the key that minted it: revoking that key ends the session
    # unopened (its link not used yet), open, ended (expired, or its link expired unused),
    # revoked (by the tenant, or with its key)
    status: PortalSessionStatus
    created_at: datetime
    link_expires_at: datetime
    opened_at: datetime | None
    expires_at: datetime
    revoked_at: datetime | None


class SessionsRevoked(_Answer):
    revoked: int  # how many running sessions this ended


class Limits(_Answer):
    """What a tenant may use: the operator's setting for it, or the default every tenant gets."""

    tenant_id: str
    max_endpoints: int  # all its customers' too
    max_endpoints_per_customer: int  # the tenant's own (of no customer) count as one customer's
    max_fanout: int  # deliveries one event may make
    accept_rate: float  # intents accepted a second (past it: 429); 0: no limit
    delivery_rate: float  # attempts started a second (past it they wait, throttled); 0: no limit
    set_by_operator: list[str]  # the limits the operator set; the others are the defaults


class PolledDelivery(_Answer):
    """A delivery as a poll reads it: what a push would have sent, and its receipt."""

    id: str  # the delivery's: the same on every read, and webhook-id
    receipt: str  # acknowledges this read, while it is visible to no one else
    event_id: str
    event_type: str
    reads: int  # how many times it has been read, this read included
    visible_again_at: datetime  # read again after this, unless acknowledged
    body: str  # exactly the bytes the signature covers: verify before parsing
    headers: dict[str, str]  # webhook-id, webhook-timestamp, webhook-signature...


class PollAcknowledged(_Answer):
    acknowledged: list[str]  # delivery ids now succeeded (or that had succeeded)
    expired: list[str]  # delivery ids whose read's visibility ended: they come back


OPENAPI_NAMES: dict[type[BaseModel], str] = {
    PolledDelivery: "PolledDeliveryOut",
    PollAcknowledged: "PollAckOut",
    Delivery: "DeliveryOut",
    DeliveryDetail: "DeliveryDetail",
    CustodyEvent: "CustodyEventOut",
    Attempt: "AttemptOut",
    FilteredOut: "FilteredOut",
    FanoutDelivery: "FanoutDelivery",
    EventAccepted: "EventAccepted",
    EventDelivery: "EventDelivery",
    Event: "EventOut",
    OAuth2: "OAuth2Out",
    Endpoint: "EndpointOut",
    EndpointCreated: "EndpointCreated",
    RedriveFilter: "RedriveFilterOut",
    RedriveJob: "RedriveJobOut",
    Stream: "StreamOut",
    Customer: "CustomerOut",
    PortalSession: "PortalSessionCreated",
    PortalSessionListed: "PortalSessionOut",
    SessionsRevoked: "SessionsRevoked",
    Limits: "LimitsOut",
}
