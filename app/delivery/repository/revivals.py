"""Redrives: finished deliveries made pending again, one by id or a bulk job's page at a
time, each archiving in custody records what it undid."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

from sqlalchemy import (
    ColumnElement,
    Update,
    and_,
    exists,
    func,
    insert,
    literal,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.ids import id_floor, is_id
from app.core.payload_retention import KEPT_WITH_RECORDS
from app.core.states import DeliveryState
from app.delivery.repository.deliveries import in_state, of_type, shown
from app.models import CustodyRecord, Delivery, Endpoint, Event

# The finished states a redrive may revive: dead, and -- replayed by a bulk redrive that asks
# for it -- succeeded. Never cancelled: that is its producer's final word.
REVIVABLE = (DeliveryState.DEAD, DeliveryState.SUCCEEDED)


def _revive(
    detail: str,
    *conditions: ColumnElement[bool],
    states: Sequence[DeliveryState] = (DeliveryState.DEAD,),
) -> Update:
    """dead (or succeeded, when ``states`` says so) -> pending, due now, same id, for the rows
    matching ``conditions``; the attempt log stays and the budget starts over (attempt numbers
    keep counting, so the floor moves up to them).

    Reviving clears the row's finish, so the same statement archives that step -- when it died
    or succeeded, after which claim, why -- and the redrive itself (``detail`` says by what) as
    custody records: the timeline keeps the whole story.
    """
    assert set(states) <= set(REVIVABLE), states
    # Its payload still kept, by the clock and in fact: the event is looked for in the same
    # statement, so that no delivery is revived once retention has detached its class.
    payload_kept = and_(
        or_(
            Delivery.payload_days >= KEPT_WITH_RECORDS,
            Delivery.created_at + func.make_interval(0, 0, 0, Delivery.payload_days) > func.now(),
        ),
        exists().where(Event.id == Delivery.event_id, Event.payload_days == Delivery.payload_days),
    )
    target = (
        select(
            Delivery.id,
            func.coalesce(Delivery.completed_at, Delivery.updated_at).label("finished_at"),
            Delivery.state,
            Delivery.dead_reason,
            Delivery.attempt_count,
        )
        .where(*conditions, payload_kept, or_(*(and_(*in_state(state)) for state in states)))
        .with_for_update()
        .cte("target")
    )
    dead_then = [target.c.id, target.c.finished_at, target.c.state, target.c.attempt_count]
    redriven_now = [target.c.id, func.now(), literal("redriven"), target.c.attempt_count]
    archived = (
        insert(CustodyRecord)
        .from_select(
            ["delivery_id", "at", "event", "attempt_number", "detail"],
            union_all(
                select(*dead_then, target.c.dead_reason), select(*redriven_now, literal(detail))
            ),
        )
        .cte("archived")
    )
    return (
        update(Delivery)
        .where(Delivery.id == target.c.id)
        .values(
            state=DeliveryState.PENDING.value,
            next_attempt_at=func.now(),
            attempt_floor=Delivery.attempt_count,
            # Sent from now on as its endpoint's transformation is now (a corrected one).
            transformed_since=id_floor("dlv", datetime.now(UTC)),
            dead_reason=None,
            completed_at=None,
            updated_at=func.now(),
        )
        .returning(Delivery)
        .add_cte(archived)
        # Callers may have loaded these rows a moment ago: refresh them from what the UPDATE
        # returned.
        .execution_options(synchronize_session=False, populate_existing=True)
    )


async def redrive(
    session: AsyncSession,
    tenant_id: str,
    delivery_id: str,
    *,
    states: Sequence[DeliveryState] | None = None,
) -> Delivery | None:
    """dead (or one of ``states``) -> pending (see _revive); None when it is in none of them."""
    if not is_id(delivery_id):
        return None
    revived = _revive(
        "on request",
        Delivery.id == delivery_id,
        Delivery.tenant_id == tenant_id,
        states=states or (DeliveryState.DEAD,),
    )
    return (await session.execute(revived)).scalar_one_or_none()


async def redrive_page(
    session: AsyncSession,
    tenant_id: str,
    *,
    job_id: str,
    region: str,
    after_id: str | None,
    limit: int,
    endpoint_id: str | None,
    event_type: str | None,
    dead_after: datetime | None,
    dead_before: datetime | None,
    states: Sequence[DeliveryState] = (DeliveryState.DEAD,),
    before_reviving: Callable[[list[str]], Awaitable[None]] | None = None,
) -> tuple[list[Delivery], str | None]:
    """Redrive the next page of finished deliveries in ``states`` matching the filter, in id
    order after ``after_id`` (the time window applies to when they finished). Deliveries whose
    endpoint is disabled or deleted are passed over (they would only die again). Returns the
    revived rows and the id the next page starts after. ``before_reviving`` gets the page's ids
    before any of its rows is locked (an ordered delivery's stream is locked before it; the
    revive's own lock then re-checks each row's state)."""
    query = select(Delivery.id).where(
        Delivery.tenant_id == tenant_id,
        shown(tenant_id),
        Delivery.region == region,
        or_(*(and_(*in_state(state)) for state in states)),
    )
    if after_id is not None:
        query = query.where(Delivery.id > after_id)
    if endpoint_id is not None:
        query = query.where(Delivery.endpoint_id == endpoint_id)
    if event_type is not None:
        query = query.where(*of_type(event_type))
    if dead_after is not None:
        query = query.where(Delivery.completed_at >= dead_after)
    if dead_before is not None:
        query = query.where(Delivery.completed_at < dead_before)
    page = list((await session.execute(query.order_by(Delivery.id).limit(limit))).scalars())
    if not page:
        return [], None
    if before_reviving is not None:
        await before_reviving(page)
    live_endpoint = select(Endpoint.id).where(
        Endpoint.enabled.is_(True), Endpoint.deleted_at.is_(None)
    )
    revived = _revive(
        f"bulk redrive {job_id}",
        Delivery.id.in_(page),
        Delivery.endpoint_id.in_(live_endpoint),
        states=states,
    )
    return list((await session.execute(revived)).scalars()), page[-1]
