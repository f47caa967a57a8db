"""Gather the facts for one delivery's explanation and timeline (see status.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.config import Settings
from app.core.payload_retention import expired
from app.core.redis_clients import FlowRedis
from app.core.scope import Scope
from app.core.states import DeliveryState
from app.delivery.repository import attempts, custody_records
from app.delivery.schemas import CustodyEventOut, DeliveryDetail, DeliveryOut
from app.delivery.service import listings, status
from app.endpoints.service import endpoints
from app.flow.service.flow_state import flow_snapshot
from app.flow.service.snapshot import FlowSnapshot
from app.flow.service.wakeups import Wakeups
from app.models import Delivery, Endpoint
from app.outbox.service import outbox
from app.streams.service import streams

log = structlog.get_logger()

REDIS_FACTS_SECONDS = 1.0


async def delivery_detail(
    session: AsyncSession,
    redis: FlowRedis,
    settings: Settings,
    scope: Scope,
    delivery_id: str,
    *,
    write_time: status.TimeWriter = datetime.isoformat,
) -> DeliveryDetail:
    """The delivery, why it is where it is and its timeline; ``write_time`` writes the moments
    in the why (the API's ISO 8601 unless a page writes times its own way)."""
    delivery = await listings.find_delivery(session, scope, delivery_id)
    endpoint = await endpoints.get_any(session, delivery.endpoint_id)
    assert endpoint is not None  # the accept read it, and endpoints are never deleted
    most = status.TIMELINE_ATTEMPTS
    tried = await attempts.list_page(session, delivery.id, limit=most + 1, after_number=None)
    archive = await custody_records.list_for(session, delivery.id, limit=most + 1)
    now = datetime.now(UTC)
    flow = unpublished_since = None
    waiting = (DeliveryState.PENDING.value, DeliveryState.ENQUEUED.value)
    due = delivery.next_attempt_at
    pushed = endpoint.delivery == "push"  # a polled delivery has no destination in Redis
    if pushed and delivery.state in waiting and due is not None and due <= now:
        flow = await _destination_now(redis, settings, endpoint)
        if flow is None:
            unpublished_since = await outbox.oldest_unpublished(session, delivery.region)
    stream = await streams.of_delivery(session, delivery)
    why = status.explain(
        delivery,
        endpoint,
        now,
        settings,
        flow,
        stream=stream,
        write_time=write_time,
        unpublished_since=unpublished_since,
    )
    # A cut list hides attempts or dead steps: claim numbers past what is shown are not guessed.
    story = status.timeline(
        delivery,
        tried[:most],
        archive[:most],
        all_attempts=len(tried) <= most and len(archive) <= most,
    )
    return DeliveryDetail(
        **DeliveryOut.model_validate(delivery).model_dump(),
        waiting_reason=why.reason,
        waiting_detail=why.detail,
        waiting_behind=_waiting_behind(delivery, stream),
        halts_its_stream=stream is not None
        and stream.head_id == delivery.id
        and stream.halted_at is not None,
        payload_expired=expired(delivery.payload_expires_at, now),
        timeline=[CustodyEventOut.model_validate(step) for step in story],
    )


async def _destination_now(
    redis: FlowRedis, settings: Settings, endpoint: Endpoint
) -> FlowSnapshot | None:
    """The destination's gate and wake-up as Redis has them now; None if Redis cannot say
    within REDIS_FACTS_SECONDS (the read holds a database connection meanwhile)."""
    ceiling = endpoint.max_in_flight or settings.default_max_in_flight
    try:
        async with asyncio.timeout(REDIS_FACTS_SECONDS):
            flow = await flow_snapshot(redis, endpoint.id, ceiling, endpoint.tenant_id)
            if flow is None:
                return None
            wake = await Wakeups(redis, settings.region).snapshot(endpoint.tenant_id, endpoint.id)
    except Exception as exc:  # on a cluster the wake-ups' master may be down, the flow's not
        # Not the flow without its wake-up: that would read as "no wake-up", i.e. stuck.
        log.warning("flow.wake_snapshot_failed", endpoint_id=endpoint.id, error=type(exc).__name__)
        return None
    return dataclasses.replace(flow, woken_in=wake.due_in)


def _waiting_behind(delivery: Delivery, stream: streams.StreamView | None) -> str | None:
    """The delivery an ordered one waits behind: its stream's head, when that is another."""
    if stream is None or delivery.completed_at is not None or stream.head_id == delivery.id:
        return None
    return stream.head_id
