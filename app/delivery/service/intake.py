"""Accepting intents: event, deliveries and outbox wake-ups, all in the caller's one transaction."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.catalogue.service.payload_schemas import PayloadSchemas
from app.core.config import Settings
from app.core.db import single_statements
from app.core.errors import (
    HeraldError,
    IdempotencyMismatch,
    NotFound,
)
from app.core.ids import is_id, new_id, sibling_id
from app.core.scope import Scope
from app.delivery.repository import deliveries, events, idempotency_keys, intents
from app.delivery.schemas import DeliveryIntent, DeliveryOut, EventIntent, FilteredOut
from app.delivery.service import fanout

# Every accept path encodes its payload and fingerprints its request by payloads.py's rules.
from app.delivery.service.payloads import encode_payload as encode_payload
from app.delivery.service.payloads import request_fingerprint as request_fingerprint
from app.endpoints.service import endpoints
from app.endpoints.service.endpoints import refusal_for, refusal_to_deliver
from app.models import Delivery
from app.outbox.service import outbox
from app.outbox.service.outbox import PendingPublication
from app.tenants.service import customers, limits

# Where an accept sends its deliveries, and the subscribed endpoints a filter passed by.
Targets = tuple[list[str], list[FilteredOut]]


@dataclass(frozen=True)
class Accepted:
    """What an accept call produced; ``replayed`` when an idempotency key matched an earlier
    request and nothing new was written."""

    event_id: str
    event_type: str
    deliveries: list[DeliveryOut]
    replayed: bool
    # Outbox rows written with this accept, for the API's fast-path publish after commit.
    publications: list[PendingPublication] = field(default_factory=list)
    filtered_out: list[FilteredOut] = field(default_factory=list)


async def _claim_key(
    session: AsyncSession,
    settings: Settings,
    *,
    tenant_id: str,
    key: str | None,
    fingerprint: bytes,
    resource_id: str,
) -> str | None:
    """Claim the idempotency key for ``resource_id``; returns the earlier resource's id when
    this request is a replay. Raises when the key was used for a different request."""
    if key is None:
        return None
    stored = await idempotency_keys.claim(
        session,
        tenant_id=tenant_id,
        key=key,
        request_hash=fingerprint,
        resource_id=resource_id,
        response_status=202,
        ttl=timedelta(hours=settings.idempotency_key_ttl_hours),
    )
    if stored is None:
        return None
    if stored.request_hash != fingerprint:
        raise IdempotencyMismatch(
            "this Idempotency-Key was already used with a different request body or route"
        )
    return stored.resource_id


async def insert_intent(
    session: AsyncSession,
    settings: Settings,
    *,
    tenant_id: str,
    event_id: str,
    customer_id: str | None,
    event_type: str,
    payload: bytes,
    endpoint_ids: list[str],
    filtered_out: list[FilteredOut],
    deliver_after: datetime | None,
    ordering_key: str | None,
    traceparent: str | None,
) -> tuple[list[Delivery], list[PendingPublication]]:
    payload_days = await events.insert_event(
        session,
        event_id=event_id,
        tenant_id=tenant_id,
        customer_id=customer_id,
        event_type=event_type,
        payload=payload,
        filtered_out=[f.model_dump() for f in filtered_out] or None,
        traceparent=traceparent,
    )
    rows = await deliveries.insert_pending(
        session,
        tenant_id=tenant_id,
        event_id=event_id,
        event_type=event_type,
        region=settings.region,
        targets=[(sibling_id("dlv", event_id), e) for e in endpoint_ids],
        deliver_after=deliver_after,
        payload_days=payload_days,
        ordering_key=ordering_key,
    )
    publications = await outbox.insert_wakeups(session, rows, settings.region)
    return rows, publications


async def accept_delivery(
    session: AsyncSession,
    settings: Settings,
    tenant_id: str,
    intent: DeliveryIntent,
    idempotency_key: str | None,
    payload_schemas: PayloadSchemas,
    traceparent: str | None = None,
) -> Accepted:
    """One delivery to the named endpoint (whatever its event_types: the intent is explicit)."""

    async def targets(payload_bytes: int) -> Targets:
        endpoint = await endpoints.get_live(session, Scope(tenant_id), intent.endpoint_id)
        if (refused := refusal_for(intent.endpoint_id, endpoint)) is not None:
            raise refused
        return [intent.endpoint_id], []

    return await _accept(
        session,
        settings,
        tenant_id,
        "POST /v1/deliveries",
        intent,
        idempotency_key,
        targets,
        payload_schemas,
        traceparent,
    )


async def accept_delivery_at_once(
    sessionmaker: async_sessionmaker[AsyncSession],
    settings: Settings,
    tenant_id: str,
    intent: DeliveryIntent,
    idempotency_key: str | None,
    payload_schemas: PayloadSchemas,
    traceparent: str | None = None,
) -> Accepted | None:
    """``accept_delivery`` as one statement -- the key's claim, endpoint check, event, delivery,
    outbox wake-up -- for the request that is new, which is nearly every one.

    None when a keyed request needs ``accept_delivery``'s transaction to be answered: its key is
    held by an earlier request (a replay, or a mismatch), or the request would be refused (a
    replay answers what was accepted, whatever the endpoint or the schema say now, so the key
    is read before the refusal is given). Nothing was written then."""
    payload = encode_payload(intent.payload, settings.max_payload_bytes)
    key = None
    if idempotency_key is not None:
        key = intents.KeyToClaim(
            idempotency_key,
            request_fingerprint("POST /v1/deliveries", intent, payload),
            timedelta(hours=settings.idempotency_key_ttl_hours),
        )
    refused: HeraldError | None = await payload_schemas.refusal(
        tenant_id, intent.event_type, intent.payload, len(payload)
    )
    if refused is None and not is_id(intent.endpoint_id):
        # Nothing could match; and NUL is no text to PostgreSQL.
        refused = NotFound(f"endpoint {intent.endpoint_id} not found")
    if refused is not None:
        if key is not None:
            return None
        raise refused
    event_id = new_id("evt")
    async with single_statements(sessionmaker) as connection:
        inserted = await intents.insert_for_endpoint(
            connection,
            tenant_id=tenant_id,
            endpoint_id=intent.endpoint_id,
            event_id=event_id,
            event_type=intent.event_type,
            payload=payload,
            delivery_id=sibling_id("dlv", event_id),
            region=settings.region,
            deliver_after=intent.deliver_after,
            traceparent=traceparent,
            ordering_key=intent.ordering_key,
            key=key,
        )
    if inserted.delivery is None and key is not None:
        return None
    refused = refusal_to_deliver(
        intent.endpoint_id,
        found=inserted.found,
        enabled=inserted.delivery is not None,
        disabled_reason=inserted.disabled_reason,
    )
    if refused is not None:
        raise refused
    assert inserted.delivery is not None
    delivery = DeliveryOut.model_validate(inserted.delivery)
    publications = []
    if inserted.outbox_id is not None:
        assert delivery.next_attempt_at is not None  # only a due delivery gets a wake-up
        publications.append(
            PendingPublication(
                inserted.outbox_id, tenant_id, delivery.endpoint_id, delivery.next_attempt_at
            )
        )
    return Accepted(event_id, intent.event_type, [delivery], False, publications)


async def accept_event(
    session: AsyncSession,
    settings: Settings,
    tenant_id: str,
    intent: EventIntent,
    idempotency_key: str | None,
    payload_schemas: PayloadSchemas,
    traceparent: str | None = None,
) -> Accepted:
    """Fan out to every enabled endpoint subscribed to the event type whose filter lets it
    through -- the named customer's endpoints, or those that belong to no customer: one
    delivery each (fanout.py)."""

    async def targets(payload_bytes: int) -> Targets:
        if intent.customer_id is not None:
            await customers.get_customer(session, tenant_id, intent.customer_id)
        tenant = await limits.tenant_of(session, tenant_id)
        return await fanout.targets_of(
            session,
            tenant_id,
            intent.customer_id,
            intent.event_type,
            intent.payload,
            payload_bytes,
            limits.Limits.defaults(settings).of(tenant).max_fanout,
        )

    return await _accept(
        session,
        settings,
        tenant_id,
        "POST /v1/events",
        intent,
        idempotency_key,
        targets,
        payload_schemas,
        traceparent,
    )


async def _accept(
    session: AsyncSession,
    settings: Settings,
    tenant_id: str,
    route: str,
    intent: DeliveryIntent | EventIntent,
    idempotency_key: str | None,
    targets: Callable[[int], Awaitable[Targets]],  # given the payload's size in bytes
    payload_schemas: PayloadSchemas,
    traceparent: str | None,
) -> Accepted:
    payload = encode_payload(intent.payload, settings.max_payload_bytes)
    event_id = new_id("evt")
    earlier = await _claim_key(
        session,
        settings,
        tenant_id=tenant_id,
        key=idempotency_key,
        fingerprint=request_fingerprint(route, intent, payload),
        resource_id=event_id,
    )
    if earlier is not None:
        replayed = await deliveries.list_for_event(session, tenant_id, earlier, replayed=True)
        found = await events.get_for_tenant(session, tenant_id, earlier)
        passed_by = [FilteredOut(**f) for f in (found.event.filtered_out if found else None) or []]
        return Accepted(
            earlier, intent.event_type, _out(replayed), replayed=True, filtered_out=passed_by
        )
    # After the key: a replay answers what was accepted, whatever the schema says now.
    await payload_schemas.check(tenant_id, intent.event_type, intent.payload, len(payload))
    endpoint_ids, filtered_out = await targets(len(payload))
    rows, publications = await insert_intent(
        session,
        settings,
        tenant_id=tenant_id,
        event_id=event_id,
        customer_id=getattr(intent, "customer_id", None),
        event_type=intent.event_type,
        payload=payload,
        endpoint_ids=endpoint_ids,
        filtered_out=filtered_out,
        deliver_after=intent.deliver_after,
        ordering_key=intent.ordering_key,
        traceparent=traceparent,
    )
    return Accepted(event_id, intent.event_type, _out(rows), False, publications, filtered_out)


def _out(rows: list[Delivery]) -> list[DeliveryOut]:
    return [DeliveryOut.model_validate(row) for row in rows]
