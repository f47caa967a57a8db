from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Integer, Text, and_, bindparam, case, func, insert, or_, select, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from app.ids import is_id
from app.models import Delivery, Endpoint, Event
from app.states import DeliveryState


async def insert_pending(
    session: AsyncSession,
    *,
    tenant_id: str,
    event_id: str,
    event_type: str,
    region: str,
    targets: Sequence[tuple[str, str]],
    deliver_after: datetime | None,
) -> list[Delivery]:
    """Insert one pending delivery per ``(delivery_id, endpoint_id)`` target, due at
    ``deliver_after`` or now (the database clock)."""
    if not targets:
        return []
    due: Any = deliver_after if deliver_after is not None else func.now()
    rows = [
        {
            "id": delivery_id,
            "tenant_id": tenant_id,
            "endpoint_id": endpoint_id,
            "event_id": event_id,
            "event_type": event_type,
            "region": region,
            "state": DeliveryState.PENDING.value,
            "next_attempt_at": due,
        }
        for delivery_id, endpoint_id in targets
    ]
    result = await session.execute(insert(Delivery).values(rows).returning(Delivery))
    return list(result.scalars())


async def get_for_tenant(
    session: AsyncSession, tenant_id: str, delivery_id: str
) -> Delivery | None:
    if not is_id(delivery_id):
        return None
    return (
        await session.execute(
            select(Delivery).where(Delivery.id == delivery_id, Delivery.tenant_id == tenant_id)
        )
    ).scalar_one_or_none()


async def list_for_event(session: AsyncSession, tenant_id: str, event_id: str) -> list[Delivery]:
    query = (
        select(Delivery)
        .where(Delivery.tenant_id == tenant_id, Delivery.event_id == event_id)
        .order_by(Delivery.endpoint_id)
    )
    return list((await session.execute(query)).scalars())


async def list_page(
    session: AsyncSession,
    tenant_id: str,
    *,
    limit: int,
    before_id: str | None,
    state: DeliveryState | None,
    endpoint_id: str | None,
    event_type: str | None,
) -> list[Delivery]:
    """Newest first, keyset-paginated on the time-ordered id: stable while rows are inserted."""
    query = select(Delivery).where(Delivery.tenant_id == tenant_id)
    if state is not None:
        query = query.where(Delivery.state == state.value)
    if endpoint_id is not None:
        query = query.where(Delivery.endpoint_id == endpoint_id)
    if event_type is not None:
        query = query.where(Delivery.event_type == event_type)
    if before_id is not None:
        query = query.where(Delivery.id < before_id)
    return list((await session.execute(query.order_by(Delivery.id.desc()).limit(limit))).scalars())


_WAITING = (DeliveryState.PENDING.value, DeliveryState.ENQUEUED.value)
_CLAIMABLE = or_(
    and_(
        Delivery.state.in_(_WAITING),
        Delivery.next_attempt_at <= func.now(),
    ),
    # A lease that ran out belongs to a worker that died or stalled: take it over.
    and_(Delivery.state == DeliveryState.LEASED.value, Delivery.lease_until < func.now()),
)


@dataclass(frozen=True)
class ClaimedDelivery:
    """Everything one attempt needs, fetched by the claim itself (one round trip)."""

    id: str
    endpoint_id: str
    attempt_number: int
    attempts_used: int  # since the last redrive
    url: str
    secrets: list[str]
    endpoint_enabled: bool
    endpoint_deleted: bool
    payload: bytes


async def claim(
    session: AsyncSession, delivery_id: str, *, region: str, token: uuid.UUID, lease_seconds: float
) -> ClaimedDelivery | None:
    """Lease a due delivery: one conditional UPDATE. None when it is not due, terminal, owned by
    another region, or leased by a live worker -- so a duplicate job does nothing."""
    statement = (
        update(Delivery)
        .where(
            Delivery.id == delivery_id,
            Delivery.region == region,
            Delivery.endpoint_id == Endpoint.id,
            Delivery.event_id == Event.id,
            _CLAIMABLE,
        )
        .values(
            state=DeliveryState.LEASED.value,
            lease_token=token,
            lease_until=func.now() + timedelta(seconds=lease_seconds),
            attempt_count=Delivery.attempt_count + 1,
            updated_at=func.now(),
        )
        .returning(
            Delivery.id,
            Delivery.endpoint_id,
            Delivery.attempt_count,
            Delivery.attempt_floor,
            Endpoint.url,
            Endpoint.secret,
            Endpoint.previous_secret,
            (Endpoint.previous_secret_expires_at > func.now()).label("previous_secret_live"),
            Endpoint.enabled,
            Endpoint.deleted_at,
            Event.payload,
        )
        .execution_options(synchronize_session=False)
    )
    row = (await session.execute(statement)).one_or_none()
    if row is None:
        return None
    secrets = [row.secret]
    if row.previous_secret and row.previous_secret_live:
        secrets.append(row.previous_secret)
    return ClaimedDelivery(
        id=row.id,
        endpoint_id=row.endpoint_id,
        attempt_number=row.attempt_count,
        attempts_used=row.attempt_count - row.attempt_floor,
        url=row.url,
        secrets=secrets,
        endpoint_enabled=row.enabled,
        endpoint_deleted=row.deleted_at is not None,
        payload=row.payload,
    )


async def record_transition(
    session: AsyncSession,
    delivery_id: str,
    *,
    token: uuid.UUID,
    state: DeliveryState,
    delay_seconds: float | None,
    outcome: str | None,
    status_code: int | None,
    error: str | None,
    dead_reason: str | None,
) -> bool:
    """Finish a leased attempt, fenced by the lease token: False when the lease was lost (it
    expired and another worker took the delivery over), in which case nothing is written."""
    terminal = state in (DeliveryState.SUCCEEDED, DeliveryState.DEAD)
    values: dict[str, Any] = {
        "state": state.value,
        "lease_token": None,
        "lease_until": None,
        "last_outcome": outcome,
        "last_status_code": status_code,
        "last_error": error,
        "dead_reason": dead_reason,
        "updated_at": func.now(),
        "completed_at": func.now() if terminal else None,
    }
    if delay_seconds is not None:
        values["next_attempt_at"] = func.now() + timedelta(seconds=delay_seconds)
    result = await session.execute(
        update(Delivery)
        .where(
            Delivery.id == delivery_id,
            Delivery.lease_token == token,
            Delivery.state == DeliveryState.LEASED.value,
            # Fencing (design.md, invariant 4): an expired lease writes nothing, taken over or not.
            Delivery.lease_until > func.now(),
        )
        .values(**values)
        .returning(Delivery.id)
        .execution_options(synchronize_session=False)
    )
    return result.first() is not None


# A lease this close to its end is taken as its holder being dead (a rerun of its job).
_NEARLY_EXPIRED = timedelta(seconds=2)


async def seconds_until_claimable(
    session: AsyncSession, delivery_id: str, region: str
) -> float | None:
    """Seconds until a claim could succeed, by the database clock: until it is due (pending,
    enqueued), or until a lease that is about to run out does. None for anything else."""
    remaining = case(
        (Delivery.state.in_(_WAITING), Delivery.next_attempt_at - func.now()),
        (
            and_(
                Delivery.state == DeliveryState.LEASED.value,
                Delivery.lease_until - func.now() < _NEARLY_EXPIRED,
            ),
            Delivery.lease_until - func.now(),
        ),
    )
    row = (
        await session.execute(
            select(func.extract("epoch", remaining)).where(
                Delivery.id == delivery_id, Delivery.region == region
            )
        )
    ).scalar_one_or_none()
    return None if row is None else float(row)


async def release(session: AsyncSession, delivery_id: str, *, token: uuid.UUID) -> bool:
    """Give back a lease whose attempt never sent anything (worker shutting down): due now,
    and the claim does not count as an attempt."""
    result = await session.execute(
        update(Delivery)
        .where(
            Delivery.id == delivery_id,
            Delivery.lease_token == token,
            Delivery.state == DeliveryState.LEASED.value,
        )
        .values(
            state=DeliveryState.PENDING.value,
            lease_token=None,
            lease_until=None,
            attempt_count=Delivery.attempt_count - 1,
            next_attempt_at=func.now(),
            updated_at=func.now(),
        )
        .returning(Delivery.id)
        .execution_options(synchronize_session=False)
    )
    return result.first() is not None


async def mark_enqueued(session: AsyncSession, published: Sequence[tuple[str, int]]) -> None:
    """pending -> enqueued for deliveries whose job Redis accepted, unless a worker moved them
    on meanwhile (the attempt count seen at publish time must still hold)."""
    if not published:
        return
    ids = [delivery_id for delivery_id, _ in published]
    counts = [count for _, count in published]
    seen = select(
        func.unnest(bindparam("ids", ids, type_=ARRAY(Text))).label("id"),
        func.unnest(bindparam("counts", counts, type_=ARRAY(Integer))).label("attempt_count"),
    ).subquery()
    await session.execute(
        update(Delivery)
        .where(
            Delivery.id == seen.c.id,
            Delivery.attempt_count == seen.c.attempt_count,
            Delivery.state == DeliveryState.PENDING.value,
        )
        .values(state=DeliveryState.ENQUEUED.value, enqueued_at=func.now(), updated_at=func.now())
        .execution_options(synchronize_session=False)
    )


async def redrive(session: AsyncSession, tenant_id: str, delivery_id: str) -> Delivery | None:
    """dead -> pending, due now, same id; the attempt log stays and the budget starts over."""
    return (
        await session.execute(
            update(Delivery)
            .where(
                Delivery.id == delivery_id,
                Delivery.tenant_id == tenant_id,
                Delivery.state == DeliveryState.DEAD.value,
            )
            .values(
                state=DeliveryState.PENDING.value,
                next_attempt_at=func.now(),
                attempt_floor=Delivery.attempt_count,
                dead_reason=None,
                completed_at=None,
                enqueued_at=None,
                updated_at=func.now(),
            )
            .returning(Delivery)
            # The caller loaded this row a moment ago: refresh it from what the UPDATE returned.
            .execution_options(synchronize_session=False, populate_existing=True)
        )
    ).scalar_one_or_none()
