"""Why a delivery is where it is: late by policy, in flight, throttled, or stuck -- and its
custody timeline. Pure: the caller fetches the facts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from app.config import Settings
from app.models import Attempt, Delivery, Endpoint
from app.states import DeliveryState


@dataclass(frozen=True)
class FlowSnapshot:
    """The destination's live flow-control state in Redis."""

    in_flight: int
    max_in_flight: int  # 0: no ceiling
    next_start_in: float  # seconds until the start-rate ceiling admits the next start


@dataclass(frozen=True)
class Explanation:
    reason: str
    detail: str | None


@dataclass(frozen=True)
class CustodyEvent:
    at: datetime
    event: str  # accepted | published | attempt | succeeded | dead
    detail: str | None


def explain(
    delivery: Delivery,
    endpoint: Endpoint,
    now: datetime,
    settings: Settings,
    flow: FlowSnapshot | None,
) -> Explanation:
    state = DeliveryState(delivery.state)
    if state is DeliveryState.SUCCEEDED:
        return Explanation("succeeded", None)
    if state is DeliveryState.DEAD:
        return Explanation("dead", delivery.dead_reason)
    if endpoint.deleted_at is not None:
        return Explanation("endpoint_disabled", "the endpoint was deleted")
    if not endpoint.enabled:
        return Explanation("endpoint_disabled", endpoint.disabled_reason)
    if state is DeliveryState.LEASED:
        assert delivery.lease_until is not None
        if delivery.lease_until > now:
            return Explanation(
                "in_flight", f"attempt {delivery.attempt_count} under way (lease until "
                f"{delivery.lease_until.isoformat()})",
            )  # fmt: skip
        expired = delivery.lease_until.isoformat()
        return Explanation(
            "stuck", f"its worker stopped: the lease expired at {expired}; the next reconcile "
            "run returns it to the queue",
        )  # fmt: skip
    due = delivery.next_attempt_at
    paused_until = endpoint.paused_until if endpoint.pause_in_force else None  # database clock
    if paused_until is not None and paused_until > due:
        return Explanation(
            "throttled", f"destination paused until {paused_until.isoformat()}: "
            f"{endpoint.pause_reason}",
        )  # fmt: skip
    if due > now:
        return Explanation("scheduled", f"next attempt at {due.isoformat()}")
    return _due_now(delivery, now, settings, flow)


def _due_now(
    delivery: Delivery, now: datetime, settings: Settings, flow: FlowSnapshot | None
) -> Explanation:
    due = delivery.next_attempt_at
    if delivery.state == DeliveryState.ENQUEUED.value:
        waiting_since = max(delivery.enqueued_at or due, due)
        if now - waiting_since > timedelta(seconds=settings.enqueued_stale_seconds):
            return Explanation(
                "stuck", f"queued since {waiting_since.isoformat()} and not picked up: its job "
                "may have been lost with Redis; the next reconcile run re-publishes it",
            )  # fmt: skip
    elif now - due > timedelta(seconds=settings.reconcile_grace_seconds):
        return Explanation(
            "stuck", f"due since {due.isoformat()} with no job queued; the next reconcile run "
            "publishes it",
        )  # fmt: skip
    if flow is not None and flow.max_in_flight and flow.in_flight >= flow.max_in_flight:
        return Explanation(
            "throttled", f"destination at its in-flight ceiling ({flow.max_in_flight})"
        )
    if flow is not None and flow.next_start_in > 0:
        return Explanation("throttled", "destination at its start-rate ceiling")
    return Explanation("queued", "due; waiting for a worker")


def timeline(
    delivery: Delivery, published: list[datetime], attempts: list[Attempt]
) -> list[CustodyEvent]:
    events = [CustodyEvent(delivery.created_at, "accepted", None)]
    events += [CustodyEvent(at, "published", "handed to the queue") for at in published]
    for attempt in attempts:
        status = attempt.status_code if attempt.status_code is not None else "no response"
        what = f"#{attempt.attempt_number}: {attempt.outcome} ({status}, {attempt.duration_ms} ms)"
        events.append(CustodyEvent(attempt.started_at, "attempt", what))
    if delivery.completed_at is not None and delivery.state in ("succeeded", "dead"):
        events.append(CustodyEvent(delivery.completed_at, delivery.state, delivery.dead_reason))
    return sorted(events, key=lambda event: event.at)
