"""Why a delivery is where it is: late by policy, in flight, throttled, or stuck -- and its
custody timeline. Pure: status_facts.py gathers the facts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.core.config import Settings
from app.core.states import SKIPPED_BY_TRANSFORMATION, TERMINAL_STATES, DeliveryState
from app.flow.service.snapshot import FlowSnapshot
from app.models import Attempt, CustodyRecord, Delivery, Endpoint
from app.streams.service.streams import StreamView

# How an explanation writes a moment: the API as ISO 8601, like every time in its JSON; the
# console as its pages write every other time (app/api/formatting.py).
TimeWriter = Callable[[datetime], str]


@dataclass(frozen=True)
class Explanation:
    reason: str
    detail: str | None


@dataclass(frozen=True)
class CustodyEvent:
    at: datetime
    event: str  # accepted | attempt | succeeded | dead | cancelled | redriven
    detail: str | None


def explain(
    delivery: Delivery,
    endpoint: Endpoint,
    now: datetime,
    settings: Settings,
    flow: FlowSnapshot | None,
    *,
    stream: StreamView | None = None,
    write_time: TimeWriter = datetime.isoformat,
    unpublished_since: datetime | None = None,
) -> Explanation:
    """Why the delivery is where it is; ``stream``, for an ordered one, is its stream now;
    ``unpublished_since``, read when Redis cannot say (``flow`` is None), is when the region's
    oldest wake-up not yet told to Redis was written."""
    state = DeliveryState(delivery.state)
    if state in TERMINAL_STATES:
        return _ended(state, delivery, stream)
    if endpoint.deleted_at is not None:
        return Explanation("endpoint_disabled", "the endpoint was deleted")
    if not endpoint.enabled:
        return Explanation("endpoint_disabled", endpoint.disabled_reason)
    if state is DeliveryState.LEASED:
        if endpoint.delivery == "poll":
            return _polled(delivery, now, write_time)
        return _leased(delivery, now, write_time)
    due = delivery.next_attempt_at
    if due is None:
        return _behind_its_head(delivery, stream)
    paused_until = endpoint.paused_until if endpoint.pause_in_force else None  # database clock
    if paused_until is not None and paused_until > due:
        return Explanation(
            "throttled",
            f"destination paused until {write_time(paused_until)}: {endpoint.pause_reason}",
        )
    if due > now:
        return Explanation("scheduled", f"next attempt at {write_time(due)}")
    if endpoint.delivery == "poll":
        # No worker sends it, so no wake-up is missing: it waits for its receiver, by design.
        return Explanation("waiting_to_be_polled", "due; its receiver has not polled for it yet")
    return _due_now(delivery, now, settings, flow, write_time, unpublished_since)


def _ended(state: DeliveryState, delivery: Delivery, stream: StreamView | None) -> Explanation:
    if state is DeliveryState.SUCCEEDED:
        return Explanation("succeeded", None)
    if state is DeliveryState.DEAD:
        return Explanation("dead", _dead(delivery, stream))
    if _skipped(delivery):
        return Explanation(
            "cancelled", "skipped: its endpoint's transformation said not to send it"
        )
    return Explanation("cancelled", "cancelled by its producer; it is not sent again")


def _skipped(delivery: Delivery) -> bool:
    """Cancelled by its endpoint's transformation, at a claim that sent nothing."""
    return (
        delivery.state == DeliveryState.CANCELLED.value
        and delivery.last_error == SKIPPED_BY_TRANSFORMATION
    )


def _leased(delivery: Delivery, now: datetime, write_time: TimeWriter) -> Explanation:
    """In flight while its lease lasts; past it, its worker stopped."""
    assert delivery.lease_until is not None
    if delivery.lease_until > now:
        return Explanation(
            "in_flight",
            f"attempt {delivery.attempt_count} under way (lease until "
            f"{write_time(delivery.lease_until)})",
        )
    expired = write_time(delivery.lease_until)
    return Explanation(
        "stuck",
        f"its worker stopped: the lease expired at {expired}; the next claim at "
        "its destination takes it over (due then, or armed again by the next reconcile run)",
    )


def _polled(delivery: Delivery, now: datetime, write_time: TimeWriter) -> Explanation:
    """Read by a poll and not acknowledged yet: it comes back when its visibility ends."""
    assert delivery.lease_until is not None
    until = write_time(delivery.lease_until)
    if delivery.lease_until > now:
        return Explanation(
            "in_flight", f"read by a poll (read {delivery.attempt_count}); hidden until {until}"
        )
    return Explanation(
        "waiting_to_be_polled",
        f"read by a poll but not acknowledged by {until}: the next poll reads it again",
    )


def _dead(delivery: Delivery, stream: StreamView | None) -> str | None:
    if stream is None:
        return delivery.dead_reason
    reason = delivery.dead_reason or "dead"
    if stream.head_id == delivery.id and stream.halted_at is not None:
        return f"{reason}; it halts its stream until an operator redrives or skips it"
    return f"{reason}; skipped: its stream went on without it"


def _behind_its_head(delivery: Delivery, stream: StreamView | None) -> Explanation:
    """An ordered delivery behind its stream's head: named, with its state."""
    if stream is not None and stream.head_id == delivery.id:
        return Explanation(
            "stuck",
            "heads its stream but has no schedule; the next reconcile run schedules it",
        )
    if stream is None or stream.head_id is None:
        return Explanation(
            "stuck",
            "waits behind its stream's head, but the stream has none; the next reconcile run "
            "hands the stream on",
        )
    head = f"{stream.head_id} (#{stream.head_seq} in its stream)"
    if stream.halted_at is not None:
        return Explanation(
            "halted",
            f"its stream is halted behind {head}, which died; an operator redrives or skips it",
        )
    if stream.head_state is None or stream.head_state in TERMINAL_STATES:
        # Only a fault leaves this: every write that ends a head hands its stream on.
        return Explanation(
            "stuck",
            f"its stream's head {stream.head_id} has ended but the stream was not handed on; "
            "the next reconcile run hands it on",
        )
    return Explanation("ordered", f"waits its turn behind {head}, which is {stream.head_state}")


def _due_now(
    delivery: Delivery,
    now: datetime,
    settings: Settings,
    flow: FlowSnapshot | None,
    write_time: TimeWriter,
    unpublished_since: datetime | None,
) -> Explanation:
    """A due delivery waits for its destination's wake-up. Parked by policy is `throttled`,
    never `stuck`: only a destination with no wake-up at all is (what reconcile repairs)."""
    if flow is None:
        return _due_without_redis(delivery, now, settings, write_time, unpublished_since)
    if flow.max_in_flight and flow.in_flight >= flow.max_in_flight:
        return Explanation(
            "throttled",
            f"destination at its in-flight ceiling ({flow.max_in_flight}); it "
            "starts when a slot frees",
        )
    if flow.next_start_in > 0:
        return Explanation("throttled", "destination at its start-rate ceiling")
    if flow.tenant_wait > 0:
        return Explanation(
            "throttled",
            "its tenant at its delivery rate (delivery_rate, GET /v1/limits); it starts when "
            "the rate allows",
        )
    if flow.woken_in is not None and flow.woken_in > WAKE_SLACK_SECONDS:
        # Set for later than the delivery is due: told with its time, so that a destination
        # parked longer than its gate needs is visible, not hidden behind "queued".
        at = write_time(now + timedelta(seconds=flow.woken_in))
        return Explanation("queued", f"due; its destination's next wake-up is at {at}")
    if flow.woken_in is not None:
        return Explanation("queued", "due; its destination is queued for a worker")
    due = delivery.next_attempt_at
    assert due is not None  # only a scheduled delivery is due
    if now - due > timedelta(seconds=settings.reconcile_grace_seconds):
        return Explanation(
            "stuck",
            f"due since {write_time(due)} and its destination has no wake-up (lost "
            "with Redis?); the next reconcile run arms it again",
        )
    return Explanation("queued", "due; waiting for a worker")


# A destination held by a taker is set this far ahead (pump.HOLD_SECONDS) while it is served.
WAKE_SLACK_SECONDS = 10.0


def _due_without_redis(
    delivery: Delivery,
    now: datetime,
    settings: Settings,
    write_time: TimeWriter,
    unpublished_since: datetime | None,
) -> Explanation:
    """Redis cannot say whether the destination has a wake-up: judged by how long the delivery
    has waited. One whose wake-up was told to Redis gets ENQUEUED_STALE_SECONDS (its
    destination may be parked by a gate that Redis also cannot show), one whose wake-up may
    still be in the outbox RECONCILE_GRACE_SECONDS. The outbox is read by its oldest row
    (``unpublished_since``): if it predates the delivery's last change, the wake-up written
    with that change may be among the rows not yet told."""
    due = delivery.next_attempt_at
    assert due is not None  # only a scheduled delivery is due
    handed_over = delivery.state == DeliveryState.ENQUEUED.value or (
        unpublished_since is None or unpublished_since > delivery.updated_at
    )
    if handed_over:
        if now - due > timedelta(seconds=settings.enqueued_stale_seconds):
            return Explanation(
                "stuck",
                f"due since {write_time(due)} and not picked up; Redis cannot "
                "say whether its destination has a wake-up (the next reconcile run arms it "
                "again if not)",
            )
    elif now - due > timedelta(seconds=settings.reconcile_grace_seconds):
        return Explanation(
            "stuck",
            f"due since {write_time(due)} and not handed to Redis; the next reconcile "
            "run arms its destination",
        )
    return Explanation("queued", "due; waiting for a worker (Redis cannot say more now)")


# A timeline tells at most this many attempt rows (and as many dead steps and redrives), and
# at most MOST_UNRECORDED_CLAIMS claim numbers past the last attempt row: bounded work.
TIMELINE_ATTEMPTS = 100
MOST_UNRECORDED_CLAIMS = 100

# Steps that share a timestamp are told cause first.
_TELLING_ORDER = {
    "accepted": 0,
    "redriven": 1,
    "attempt": 3,
    "succeeded": 4,
    "dead": 4,
    "cancelled": 4,
}


@dataclass(frozen=True)
class _End:
    """A dead step: when, after which claim, and why."""

    at: datetime
    attempt_number: int
    reason: str | None


def timeline(
    delivery: Delivery,
    attempts: list[Attempt],
    archive: list[CustodyRecord],
    *,
    all_attempts: bool,
) -> list[CustodyEvent]:
    """The custody story in order: accepted, every numbered attempt, every
    dead step and redrive (from ``archive``: reviving a row clears its dead step), and how it
    ended. ``attempts`` are the first of the delivery's attempt rows, all of them when
    ``all_attempts``; numbers past the last row are then left untold rather than guessed."""
    recorded = {attempt.attempt_number: attempt for attempt in attempts}
    told_up_to = delivery.attempt_count if all_attempts else max(recorded, default=0)
    # Claims that left no row are told one by one, so a delivery whose claims keep dying
    # unsent could otherwise grow its timeline without bound.
    told_up_to = min(told_up_to, max(recorded, default=0) + MOST_UNRECORDED_CLAIMS)
    ends = [_End(r.at, r.attempt_number, r.detail) for r in archive if r.event == "dead"]
    finished = delivery.completed_at
    if delivery.state == DeliveryState.DEAD.value and finished is not None:
        ends.append(_End(finished, delivery.attempt_count, delivery.dead_reason))
    events = [CustodyEvent(delivery.created_at, "accepted", None)]
    events += [CustodyEvent(r.at, "redriven", r.detail) for r in archive if r.event == "redriven"]
    # A replayed success (bulk redrive of succeeded deliveries) is archived like a dead step.
    events += [CustodyEvent(r.at, "succeeded", None) for r in archive if r.event == "succeeded"]
    events += _attempts(delivery, recorded, ends, told_up_to)
    for end in ends:
        # A claim that ended in `dead` without an attempt row sent nothing (endpoint disabled
        # or deleted, budget spent): the dead step accounts for its number.
        unsent = end.attempt_number not in recorded and end.attempt_number <= told_up_to
        note = f" (attempt #{end.attempt_number} was not sent)" if unsent else ""
        events.append(CustodyEvent(end.at, "dead", f"{end.reason or 'dead'}{note}"))
    if delivery.state == DeliveryState.SUCCEEDED.value and finished is not None:
        events.append(CustodyEvent(finished, "succeeded", None))
    if delivery.state == DeliveryState.CANCELLED.value and finished is not None:
        by = "by its endpoint's transformation" if _skipped(delivery) else "by its producer"
        events.append(CustodyEvent(finished, "cancelled", by))
    return sorted(events, key=lambda event: (event.at, _TELLING_ORDER[event.event]))


def _attempts(
    delivery: Delivery, recorded: dict[int, Attempt], ends: list[_End], told_up_to: int
) -> list[CustodyEvent]:
    """One step per claim number. A number with neither an attempt row nor a dead step is a
    claim whose worker stopped or lost its lease before recording anything."""
    ended = {end.attempt_number for end in ends}
    if _skipped(delivery):  # its last claim sent nothing: the cancelled step tells it
        ended.add(delivery.attempt_count)
    in_flight = delivery.attempt_count if delivery.state == DeliveryState.LEASED.value else None
    events = []
    for number in range(1, told_up_to + 1):
        attempt = recorded.get(number)
        if attempt is not None:
            status = attempt.status_code if attempt.status_code is not None else "no response"
            what = f"#{number}: {attempt.outcome} ({status}, {attempt.duration_ms} ms)"
            events.append(CustodyEvent(attempt.started_at, "attempt", what))
        elif number not in ended and number != in_flight:
            # Its time was never recorded: it is told just before whatever came next.
            later = [a.started_at for n, a in recorded.items() if n > number]
            later += [end.at for end in ends if end.attempt_number > number]
            what = (
                f"#{number}: no result recorded (its worker stopped or lost the lease; the "
                "request may have gone out)"
            )
            events.append(CustodyEvent(min(later, default=delivery.updated_at), "attempt", what))
    return events
