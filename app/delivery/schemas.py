from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from app.core.fields import (
    MAX_PAYLOAD_DEPTH,
    CustomerId,
    EndpointId,
    EventType,
    EventTypeSelector,
    IdempotencyKey,
    OrderingKey,
    TenantEventType,
    Timestamp,
)
from app.core.payload_retention import payload_expiry
from app.core.states import DeliveryState, Outcome

MAX_DEFER = timedelta(days=365)
_PAYLOAD = (
    "A JSON object, sent as the request body. Objects and arrays in it may nest at most "
    f"{MAX_PAYLOAD_DEPTH} levels deep (the payload itself is level 1)."
)

_ORDERING_KEY = (
    "The stream this intent belongs to at an endpoint whose `ordering` is `key`: deliveries "
    "with one key arrive in the order they were accepted. Ignored for ordering by other "
    "endpoints (kept, and shown)."
)


def _within_a_year(value: datetime) -> datetime:
    if value - datetime.now(UTC) > MAX_DEFER:
        raise ValueError("deliver_after may be at most 365 days ahead")
    # The past means "now"; clamped so that nothing downstream works with the far past.
    return max(value, datetime(2000, 1, 1, tzinfo=UTC))


DeliverAfter = Annotated[Timestamp, AfterValidator(_within_a_year)]


class DeliveryIntent(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "endpoint_id": "ep_01JDQ8Z6V4Q0K9X7M3T5R2N8C1",
                    "event_type": "invoice.paid",
                    "payload": {"invoice_id": "in_1042", "amount": 4200, "currency": "EUR"},
                }
            ]
        },
    )

    endpoint_id: EndpointId = Field(description="The endpoint's id (ep_...).")
    event_type: TenantEventType
    payload: dict[str, Any] = Field(description=_PAYLOAD)
    deliver_after: DeliverAfter | None = Field(
        default=None,
        description="RFC 3339 time with offset; no attempt starts before it. At most 365 days "
        "ahead; a time in the past means now.",
    )
    ordering_key: OrderingKey | None = Field(default=None, description=_ORDERING_KEY)


class TestEventRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"event_type": "invoice.paid"}, {}]},
    )

    event_type: EventType = Field(
        default="herald.test",
        description="A type in the catalogue, whose example is the payload unless one is "
        "given; or herald.test (the default), whose payload says it is a test.",
    )
    payload: dict[str, Any] | None = Field(
        default=None, description="The payload, instead of the type's example. " + _PAYLOAD
    )


class EventIntent(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"event_type": "order.paid", "payload": {"order_id": "o_77", "total": 1999}}
            ]
        },
    )

    event_type: TenantEventType
    payload: dict[str, Any] = Field(description=_PAYLOAD)
    customer_id: CustomerId | None = Field(
        default=None,
        description="Publish to this customer of the tenant: only its endpoints receive the "
        "event. Without one, only the endpoints that belong to no customer do.",
    )
    deliver_after: DeliverAfter | None = None
    ordering_key: OrderingKey | None = Field(default=None, description=_ORDERING_KEY)


class DeliveryOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    endpoint_id: str
    event_id: str
    event_type: str
    state: DeliveryState
    attempt_count: int
    next_attempt_at: datetime | None = Field(
        description="When the next attempt may start; null while an ordered delivery waits "
        "behind its stream's head."
    )
    ordering_key: str | None
    stream_seq: int | None = Field(
        description="Its number in its stream (ordered endpoints only): the order Herald "
        "assigned at accept, sent as `Herald-Stream-Sequence`."
    )
    lease_until: datetime | None
    last_outcome: Outcome | None
    last_status_code: int | None
    dead_reason: str | None
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None
    payload_expires_at: datetime | None = Field(
        description="When the event's payload is dropped, by its tenant's settings when it "
        "was accepted (`payload_retention_days`, else `retention_days`); null: kept as long as "
        "this record. "
        "The delivery, its attempts and its timeline stay after it."
    )

    @model_validator(mode="before")
    @classmethod
    def _payload_expiry(cls, data: Any) -> Any:
        """A row as a statement returned it carries ``payload_days``, not the moment."""
        if isinstance(data, dict) and "payload_expires_at" not in data and "payload_days" in data:
            expiry = payload_expiry(data["created_at"], data["payload_days"])
            return {**data, "payload_expires_at": expiry}
        return data


class EventDelivery(BaseModel):
    """One of an event's deliveries, as the event tells it."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    endpoint_id: str
    state: DeliveryState
    attempt_count: int
    last_status_code: int | None
    completed_at: datetime | None


class EventOut(BaseModel):
    id: str
    event_type: str
    payload: dict[str, Any] | None = Field(
        description="The payload as accepted, byte for byte its JSON; null once it expired."
    )
    payload_expires_at: datetime | None = Field(
        description="When the payload is dropped (its tenant's `payload_retention_days` when "
        "it was accepted); null: kept as long as its deliveries' records."
    )
    payload_expired: bool = Field(description="The payload is past `payload_expires_at`.")
    created_at: datetime
    deliveries: list[EventDelivery] = Field(
        description="Every delivery the event fanned out to (or the one a delivery intent "
        "made), by endpoint id."
    )
    filtered_out: list[FilteredOut] = Field(
        description="Subscribed endpoints whose filter said no when it was published, and why."
    )


class FanoutDelivery(BaseModel):
    id: str
    endpoint_id: str


class FilteredOut(BaseModel):
    """A subscribed endpoint whose filter the event did not pass."""

    endpoint_id: str
    reason: str


class EventAccepted(BaseModel):
    id: str
    event_type: str
    deliveries: list[FanoutDelivery]
    filtered_out: list[FilteredOut] = Field(
        default_factory=list, description="Subscribed endpoints whose filter said no, and why."
    )


class AttemptOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    attempt_number: int
    started_at: datetime
    duration_ms: int
    status_code: int | None
    outcome: Outcome
    error: str | None
    response_body: str | None


class CustodyEventOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    at: datetime
    event: str = Field(description="accepted | attempt | dead | redriven | succeeded | cancelled")
    detail: str | None


class DeliveryDetail(DeliveryOut):
    waiting_reason: str = Field(
        description="scheduled | queued | waiting_to_be_polled (a polling endpoint's: due, its "
        "receiver has not read it yet) | in_flight | throttled | endpoint_disabled | stuck | "
        "ordered (waits its turn behind its stream's head) | halted (its stream waits for an "
        "operator, behind a dead head) | succeeded | dead | cancelled"
    )
    waiting_detail: str | None = Field(description="The why, in words: until when, by what rule.")
    waiting_behind: str | None = Field(
        default=None,
        description="For an ordered delivery that waits its turn: the id of the delivery "
        "it waits behind (its stream's head).",
    )
    halts_its_stream: bool = Field(
        default=False,
        description="A dead ordered delivery that halts its stream: redrive it (retried in "
        "place) or skip it (`POST /v1/deliveries/{id}/skip`).",
    )
    payload_expired: bool = Field(
        default=False,
        description="The event's payload is past `payload_expires_at`: it is no longer shown, "
        "and the delivery cannot be redriven. One still live sends it all the same.",
    )
    timeline: list[CustodyEventOut]


RedriveState = Literal["dead", "succeeded"]


class RedriveFilter(BaseModel):
    """Which finished deliveries to send again; fields left out match everything."""

    model_config = ConfigDict(extra="forbid")

    endpoint_id: EndpointId | None = None
    event_type: EventTypeSelector | None = None
    states: list[RedriveState] = Field(
        default=["dead"],
        min_length=1,
        max_length=2,
        description="Which finished deliveries: `dead` (the default), and `succeeded` to replay "
        "what a receiver says it lost. A replay is sent under the same delivery id: a receiver "
        "that deduplicates by `webhook-id` may ignore it.",
    )
    dead_after: Timestamp | None = Field(
        default=None, description="finished (died, or succeeded) at or after"
    )
    dead_before: Timestamp | None = Field(
        default=None,
        description="finished (died, or succeeded) before; later than `dead_after` when both "
        "are given",
    )

    @model_validator(mode="after")
    def _range_can_match(self) -> RedriveFilter:
        # [dead_after, dead_before) with its end not after its start matches nothing: a job
        # that would redrive 0 is a mistake to point out (swapped bounds, a zone forgotten).
        after, before = self.dead_after, self.dead_before
        if after is not None and before is not None and before <= after:
            raise PydanticCustomError(
                "time_range", "dead_before must be later than dead_after, or no delivery can match"
            )
        return self


class RedriveFilterOut(BaseModel):
    """A job's filter as it was stored: read back as it is, not held again to today's rules
    (a job accepted under older ones must stay readable)."""

    endpoint_id: str | None = None
    event_type: str | None = None
    states: list[str] = ["dead"]  # jobs from before replay existed were of dead ones
    dead_after: datetime | None = None
    dead_before: datetime | None = None


class RedriveJobOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    status: str = Field(description="queued | running | succeeded | failed")
    filter: RedriveFilterOut
    redriven: int = Field(description="Deliveries sent again so far.")
    more: bool = Field(
        description="The job stopped at the most one redrive of dead deliveries may revive "
        "(50,000), and more match: ask again to go on. A replay goes to the end."
    )
    error: str | None
    created_at: datetime
    finished_at: datetime | None


BATCH_LIMIT = 1000


class BatchItem(DeliveryIntent):
    idempotency_key: IdempotencyKey | None = Field(
        default=None, description="Per-item key, as the Idempotency-Key header of a single POST."
    )


class BatchIntents(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Items are validated one by one, so that one bad item fails alone.
    items: list[dict[str, Any]] = Field(min_length=1, max_length=BATCH_LIMIT)


class BatchItemResult(BaseModel):
    index: int
    status: int = Field(description="202 accepted, 200 replayed, or the item's problem status")
    delivery: DeliveryOut | None = None
    error: dict[str, Any] | None = Field(default=None, description="RFC 9457 problem")


class BatchCounts(BaseModel):
    accepted: int
    replayed: int
    failed: int


class BatchAccepted(BatchCounts):
    items: list[BatchItemResult]
