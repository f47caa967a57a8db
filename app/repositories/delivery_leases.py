"""Leases on deliveries: the claim, the fenced record, the release. A worker holds a delivery
only through these, and only while its lease token is current and unexpired."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import and_, case, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from app.models import Delivery, Endpoint, Event
from app.states import DeliveryState

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


def _held(delivery_id: str, token: uuid.UUID) -> tuple[ColumnElement[bool], ...]:
    """Fencing (design.md, invariant 4): only the current holder of a live lease may write;
    an expired lease writes nothing, whether or not another worker took over."""
    return (
        Delivery.id == delivery_id,
        Delivery.lease_token == token,
        Delivery.state == DeliveryState.LEASED.value,
        Delivery.lease_until > func.now(),
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
        .where(*_held(delivery_id, token))
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
        .where(*_held(delivery_id, token))
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
