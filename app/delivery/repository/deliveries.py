from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import (
    ColumnElement,
    Select,
    exists,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.fields import family_of
from app.core.ids import is_id, sibling_range
from app.core.states import TERMINAL_STATES, DeliveryState
from app.models import Delivery, Stream
from app.streams.repository.streams import numbering

# One event's deliveries, one per target ($3 delivery ids, $4 endpoint ids, in the event's
# order), each numbered in its stream where its endpoint is ordered (app/streams/). $1 tenant,
# $2 event, $5 event type, $6 region, $7 deliver_after (NULL: now), $8 the ordering key, $9
# the event's payload_days.
_INSERT_FOR_EVENT = f"""
WITH item AS (
    SELECT i.*, $8::text AS ordering_key
      FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS i(delivery_id, endpoint_id, n)
), {numbering("item")}
INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type, region, state,
                        next_attempt_at, ordering_key, stream, stream_seq, deliver_after,
                        payload_days)
SELECT item.delivery_id, $1, item.endpoint_id, $2, $5, $6, 'pending',
       CASE WHEN numbered.seq IS NULL OR numbered.is_head THEN coalesce($7, now()) END,
       $8, numbered.stream, numbered.seq, CASE WHEN numbered.seq IS NOT NULL THEN $7 END, $9
  FROM item LEFT JOIN numbered USING (n)
 ORDER BY item.n
RETURNING *
"""  # noqa: S608


async def insert_pending(
    session: AsyncSession,
    *,
    tenant_id: str,
    event_id: str,
    event_type: str,
    region: str,
    targets: Sequence[tuple[str, str]],
    deliver_after: datetime | None,
    payload_days: int,
    ordering_key: str | None = None,
) -> list[Delivery]:
    """Insert one pending delivery per ``(delivery_id, endpoint_id)`` target, due at
    ``deliver_after`` or now (the database clock) -- or, ordered and behind its stream's
    head, waiting unscheduled."""
    if not targets:
        return []
    connection = await session.connection()
    result = await connection.exec_driver_sql(
        _INSERT_FOR_EVENT,
        (
            tenant_id,
            event_id,
            [delivery_id for delivery_id, _ in targets],
            [endpoint_id for _, endpoint_id in targets],
            event_type,
            region,
            deliver_after,
            ordering_key,
            payload_days,
        ),
    )
    # Rows as inserted, not tracked by the session: the caller only reads them.
    return [Delivery(**row._mapping) for row in result.all()]


def shown(tenant_id: str) -> ColumnElement[bool]:
    """What the tenant still sees of its deliveries: every live one, those finished within its
    own retention (the SQL function kept_since), and the dead head of a halted stream (someone
    must still redrive or skip it). Their rows stay until their day goes, at the operator's
    retention: the tenant's only shortens what it is shown."""
    return or_(
        Delivery.completed_at.is_(None),
        Delivery.completed_at >= func.kept_since(tenant_id),
        exists().where(Stream.head_id == Delivery.id, Stream.halted_at.is_not(None)),
    )


async def get_for_tenant(
    session: AsyncSession, tenant_id: str, delivery_id: str
) -> Delivery | None:
    if not is_id(delivery_id):
        return None
    query = select(Delivery).where(
        Delivery.id == delivery_id, Delivery.tenant_id == tenant_id, shown(tenant_id)
    )
    return (await session.execute(query)).scalar_one_or_none()


async def owner_of(session: AsyncSession, delivery_id: str) -> str | None:
    """The tenant a delivery belongs to, whoever's it is (an admin's search); None if none."""
    if not is_id(delivery_id):
        return None
    query = select(Delivery.tenant_id).where(Delivery.id == delivery_id)
    return (await session.execute(query)).scalar_one_or_none()


async def list_for_event(
    session: AsyncSession, tenant_id: str, event_id: str, *, replayed: bool = False
) -> list[Delivery]:
    """The event's deliveries the tenant is shown; ``replayed``: all of them, as a request
    replayed under its idempotency key answers what it made, however long ago it finished."""
    if not is_id(event_id):
        return []
    query = (
        select(Delivery)
        .where(Delivery.tenant_id == tenant_id, *of_event(event_id))
        .order_by(Delivery.endpoint_id)
    )
    if not replayed:
        query = query.where(shown(tenant_id))
    return list((await session.execute(query)).scalars())


def of_event(event_id: str) -> list[ColumnElement[bool]]:
    """An event's deliveries, found by primary key: each carries the event's millisecond
    (``sibling_id``), so they are one millisecond's ids of one partition, and no index on
    ``event_id`` is written. Deliveries minted before partitioning need not be siblings; they
    sort below ``deliveries_siblings_from()`` (migration 0040), where that index still is."""
    lowest, highest = sibling_range("dlv", event_id)
    return [
        Delivery.event_id == event_id,
        Delivery.id >= lowest,  # minted after its event: never below it
        or_(Delivery.id <= highest, Delivery.id < func.deliveries_siblings_from()),
    ]


def in_state(state: DeliveryState) -> list[ColumnElement[bool]]:
    """``state = <state>``, and what the checks on the table make it imply (``completed_at IS
    NULL`` for a live state, ``dead_reason IS NOT NULL`` for dead): the same rows, but stated
    so that the planner can prove a partial index on those columns applies -- the indexes that
    outlive the ones on ``state`` (migration 0009)."""
    conditions = [Delivery.state == state.value]
    if state is DeliveryState.DEAD:
        conditions.append(Delivery.dead_reason.is_not(None))
    elif state.value not in TERMINAL_STATES:
        conditions.append(Delivery.completed_at.is_(None))
    return conditions


def of_type(selector: str) -> list[ColumnElement[bool]]:
    """Deliveries of the event types ``selector`` selects: one type, a family (``order.*``), or
    every type (``*``: no condition)."""
    family = family_of(selector)
    if family is None:
        return [Delivery.event_type == selector]
    return [Delivery.event_type.startswith(family, autoescape=True)] if family else []


async def list_page(
    session: AsyncSession,
    tenant_id: str,
    *,
    limit: int,
    before_id: str | None,
    state: DeliveryState | None,
    endpoint_id: str | None,
    event_type: str | None,
    event_id: str | None = None,
    finished_after: datetime | None = None,
    finished_before: datetime | None = None,
    to_endpoints: Select[str] | None = None,
) -> list[Delivery]:
    """Newest first, keyset-paginated on the time-ordered id: stable while rows are inserted.
    ``finished_*`` bound when a delivery ended (died, for dead ones); ``to_endpoints``: only
    to the endpoints whose ids it selects (a customer's)."""
    query = select(Delivery).where(Delivery.tenant_id == tenant_id)
    if state is None or state.value in TERMINAL_STATES:
        query = query.where(shown(tenant_id))  # live ones are all shown: no need to ask
    if finished_after is not None:
        query = query.where(Delivery.completed_at >= finished_after)
    if finished_before is not None:
        query = query.where(Delivery.completed_at < finished_before)
    if event_id is not None:
        query = query.where(*of_event(event_id))
    if state is not None:
        query = query.where(*in_state(state))
    if endpoint_id is not None:
        query = query.where(Delivery.endpoint_id == endpoint_id)
    if to_endpoints is not None:
        query = query.where(Delivery.endpoint_id.in_(to_endpoints))
    if event_type is not None:
        query = query.where(*of_type(event_type))
    if before_id is not None:
        query = query.where(Delivery.id < before_id)
    return list((await session.execute(query.order_by(Delivery.id.desc()).limit(limit))).scalars())


async def cancel(session: AsyncSession, tenant_id: str, delivery_id: str) -> Delivery | None:
    """Unfinished -> cancelled, in one statement; None when the delivery is finished (or not
    the tenant's). A lease stays as it is: the attempt in flight under it is still recorded, and
    the record leaves the state cancelled (delivery_records). A claim and a cancel lock the
    row in turn, so the cancel sees the claim's lease or the claim never sees the row."""
    if not is_id(delivery_id):
        return None
    statement = (
        update(Delivery)
        .where(
            Delivery.id == delivery_id,
            Delivery.tenant_id == tenant_id,
            Delivery.completed_at.is_(None),
        )
        .values(state=DeliveryState.CANCELLED.value, completed_at=func.now(), updated_at=func.now())
        .returning(Delivery)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    return (await session.execute(statement)).scalar_one_or_none()


async def due_now(session: AsyncSession, tenant_id: str, delivery_id: str) -> Delivery | None:
    """A delivery waiting for its next attempt -- tried before, not being tried, scheduled for
    later -- made due now, in one statement; None when it is not such a delivery."""
    if not is_id(delivery_id):
        return None
    statement = (
        update(Delivery)
        .where(
            Delivery.id == delivery_id,
            Delivery.tenant_id == tenant_id,
            Delivery.state.in_((DeliveryState.PENDING.value, DeliveryState.ENQUEUED.value)),
            Delivery.attempt_count > 0,
            Delivery.next_attempt_at > func.now(),
        )
        .values(next_attempt_at=func.now(), updated_at=func.now())
        .returning(Delivery)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    return (await session.execute(statement)).scalar_one_or_none()
