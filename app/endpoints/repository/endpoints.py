from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import ColumnElement, Row, Select, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import set_committed_value

from app.core.fields import selectors_of
from app.core.ids import is_id
from app.core.scope import Scope
from app.models import Customer, Endpoint

_live = Endpoint.deleted_at.is_(None)
# RETURNING an entity leaves its column properties unloaded (and an async session cannot load
# them lazily), so statements that return an endpoint return its pause state alongside.
_RETURNED = (Endpoint, Endpoint.pause_in_force)


def _owned(scope: Scope) -> list[ColumnElement[bool]]:
    """The scope's live endpoints: the tenant's, and the customer's alone when it names one."""
    owned = [Endpoint.tenant_id == scope.tenant_id, _live]
    if scope.customer_id is not None:
        owned.append(Endpoint.customer_id == scope.customer_id)
    return owned


def _returned(row: Row[Endpoint, bool] | None) -> Endpoint | None:
    if row is None:
        return None
    endpoint, pause_in_force = row
    set_committed_value(endpoint, "pause_in_force", pause_in_force)
    return endpoint


async def insert_endpoint(session: AsyncSession, **values: Any) -> Endpoint:
    endpoint = _returned(
        (await session.execute(insert(Endpoint).values(**values).returning(*_RETURNED))).one()
    )
    assert endpoint is not None
    return endpoint


async def get_live(session: AsyncSession, scope: Scope, endpoint_id: str) -> Endpoint | None:
    """The tenant's endpoint, unless deleted. Another tenant's id finds nothing."""
    if not is_id(endpoint_id):
        return None
    return (
        await session.execute(select(Endpoint).where(Endpoint.id == endpoint_id, *_owned(scope)))
    ).scalar_one_or_none()


async def lock_live(session: AsyncSession, scope: Scope, endpoint_id: str) -> Endpoint | None:
    """``get_live``, the row locked until the transaction ends and read afresh: what a change
    decides on cannot change under it."""
    if not is_id(endpoint_id):
        return None
    return (
        await session.execute(
            select(Endpoint)
            .where(Endpoint.id == endpoint_id, *_owned(scope))
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    ).scalar_one_or_none()


async def get_live_many(
    session: AsyncSession, scope: Scope, endpoint_ids: set[str]
) -> dict[str, Endpoint]:
    wanted = [e for e in endpoint_ids if is_id(e)]
    if not wanted:
        return {}
    rows = await session.execute(select(Endpoint).where(Endpoint.id.in_(wanted), *_owned(scope)))
    return {endpoint.id: endpoint for endpoint in rows.scalars()}


async def get_any(session: AsyncSession, endpoint_id: str) -> Endpoint | None:
    """An endpoint by id, deleted or not (a delivery's own endpoint, for explaining it)."""
    return await session.get(Endpoint, endpoint_id)


async def list_page(
    session: AsyncSession, scope: Scope, *, limit: int, before_id: str | None
) -> list[Endpoint]:
    query = select(Endpoint).where(*_owned(scope))
    if before_id is not None:
        query = query.where(Endpoint.id < before_id)
    return list((await session.execute(query.order_by(Endpoint.id.desc()).limit(limit))).scalars())


async def list_troubled(session: AsyncSession, scope: Scope, *, limit: int) -> list[Endpoint]:
    """The tenant's endpoints that are not delivering freely: disabled, paused, or with their
    breaker open; most recently failing first."""
    query = select(Endpoint).where(
        *_owned(scope),
        or_(
            Endpoint.enabled.is_(False),
            Endpoint.paused_until > func.now(),
            Endpoint.breaker_trips > 0,
        ),
    )
    ordered = query.order_by(Endpoint.failing_since.desc().nulls_last(), Endpoint.id.desc())
    return list((await session.execute(ordered.limit(limit))).scalars())


async def update_fields(
    session: AsyncSession, scope: Scope, endpoint_id: str, values: dict[str, Any]
) -> Endpoint | None:
    if not is_id(endpoint_id):
        return None
    return _returned(
        (
            await session.execute(
                update(Endpoint)
                .where(Endpoint.id == endpoint_id, *_owned(scope))
                .values(**values, updated_at=func.now())
                .returning(*_RETURNED)
                .execution_options(populate_existing=True)  # values may be SQL (now() + ...)
            )
        ).one_or_none()
    )


async def rotate_secret(
    session: AsyncSession, scope: Scope, endpoint_id: str, *, sealed: bytes, overlap: timedelta
) -> Endpoint | None:
    """The new secret signs from now on; the current one keeps signing alongside it until
    ``overlap`` has passed, so receivers can switch without missing a delivery."""
    if not is_id(endpoint_id):
        return None
    return _returned(
        (
            await session.execute(
                update(Endpoint)
                .where(Endpoint.id == endpoint_id, *_owned(scope))
                .values(
                    previous_secret_sealed=Endpoint.secret_sealed,
                    previous_secret_expires_at=func.now() + overlap,
                    secret_sealed=sealed,
                    updated_at=func.now(),
                )
                .returning(*_RETURNED)
                .execution_options(populate_existing=True)
            )
        ).one_or_none()
    )


async def rotate_signing_key(
    session: AsyncSession,
    scope: Scope,
    endpoint_id: str,
    *,
    sealed: bytes,
    public_key: str,
    overlap: timedelta,
) -> Endpoint | None:
    """The new ed25519 pair signs from now on; the current pair (if any) keeps signing beside
    it until ``overlap`` has passed."""
    return _returned(
        (
            await session.execute(
                update(Endpoint)
                .where(Endpoint.id == endpoint_id, *_owned(scope))
                .values(
                    previous_signing_key_sealed=Endpoint.signing_key_sealed,
                    previous_public_key=Endpoint.public_key,
                    previous_signing_key_expires_at=func.now() + overlap,
                    signing_key_sealed=sealed,
                    public_key=public_key,
                    updated_at=func.now(),
                )
                .returning(*_RETURNED)
                .execution_options(populate_existing=True)
            )
        ).one_or_none()
    )


_DELETED = {
    "deleted_at": func.now(),
    "enabled": False,
    "disabled_reason": "deleted",
    "updated_at": func.now(),
}


async def soft_delete(session: AsyncSession, scope: Scope, endpoint_id: str) -> Endpoint | None:
    """The endpoint deleted (its history kept), or None: none of the scope's has that id."""
    if not is_id(endpoint_id):
        return None
    deleted = update(Endpoint).where(Endpoint.id == endpoint_id, *_owned(scope)).values(_DELETED)
    return _returned(
        (
            await session.execute(
                deleted.returning(*_RETURNED).execution_options(populate_existing=True)
            )
        ).one_or_none()
    )


@dataclass(frozen=True)
class Subscriber:
    endpoint_id: str
    filter: str | None  # a CEL expression the event must pass, or None


async def subscribed_to(
    session: AsyncSession, tenant_id: str, customer_id: str | None, event_type: str, *, limit: int
) -> list[Subscriber]:
    """The enabled endpoints that receive ``event_type`` published to ``customer_id``, with
    their filters: the customer's own endpoints, or -- published to no customer -- the tenant's
    endpoints that belong to none (so a tenant that never names a customer sees no change).
    Found by index, each subscription matched by one array overlap with the selectors that
    select the type (app.core.fields.selectors_of). At most ``limit``, in id order."""
    query = (
        select(Endpoint.id, Endpoint.filter)
        .where(
            Endpoint.tenant_id == tenant_id,
            _live,
            Endpoint.customer_id == customer_id
            if customer_id is not None
            else Endpoint.customer_id.is_(None),
            Endpoint.enabled.is_(True),
            # Subscribed by type, by family (order.*) or to everything (* or null).
            or_(
                Endpoint.event_types.is_(None),
                Endpoint.event_types.overlap(selectors_of(event_type)),
            ),
        )
        .order_by(Endpoint.id)
        .limit(limit)
    )
    return [Subscriber(row.id, row.filter) for row in await session.execute(query)]


async def operational_subscribers(
    session: AsyncSession, tenant_id: str, event_type: str, *, limit: int
) -> list[Subscriber]:
    """The tenant's enabled operational endpoints subscribed to ``event_type`` (one of
    Herald's own), with their filters; at most ``limit``, in id order. By the partial index of
    operational endpoints: a tenant has a handful."""
    query = (
        select(Endpoint.id, Endpoint.filter)
        .where(
            Endpoint.tenant_id == tenant_id,
            Endpoint.operational.is_(True),
            _live,
            Endpoint.customer_id.is_(None),
            Endpoint.enabled.is_(True),
            Endpoint.event_types.overlap(selectors_of(event_type)),
        )
        .order_by(Endpoint.id)
        .limit(limit)
    )
    return [Subscriber(row.id, row.filter) for row in await session.execute(query)]


async def count_live(
    session: AsyncSession, tenant_id: str, customer_id: str | None
) -> tuple[int, int]:
    """The tenant's live endpoints: all of them, and those of ``customer_id`` (of no customer,
    for None)."""
    same = (
        Endpoint.customer_id == customer_id
        if customer_id is not None
        else Endpoint.customer_id.is_(None)
    )
    query = select(func.count(), func.count().filter(same)).where(
        Endpoint.tenant_id == tenant_id, _live
    )
    every, of_customer = (await session.execute(query)).one()
    return int(every), int(of_customer)


async def has_filter(session: AsyncSession, tenant_id: str, source: str) -> tuple[bool, int]:
    """Whether one of the tenant's live endpoints has this filter already, and how many
    distinct filters they have."""
    query = select(
        func.count(Endpoint.filter.distinct()),
        func.count().filter(Endpoint.filter == source),
    ).where(Endpoint.tenant_id == tenant_id, _live, Endpoint.filter.is_not(None))
    distinct, same = (await session.execute(query)).one()
    return bool(same), int(distinct)


def ids_in_scope(scope: Scope) -> Select[str]:
    """The ids of the scope's endpoints, deleted or not, as a query (to narrow another by):
    what was sent to them is the scope's to see -- a customer's, for endpoints of its current
    life."""
    query = select(Endpoint.id).where(Endpoint.tenant_id == scope.tenant_id)
    if scope.customer_id is not None:
        # Made in the customer's current life: one deleted and put again sees nothing of the
        # endpoints (and so the deliveries) of its earlier one.
        life = (
            select(Customer.created_at)
            .where(
                Customer.tenant_id == scope.tenant_id,
                Customer.id == scope.customer_id,
                Customer.deleted_at.is_(None),
            )
            .scalar_subquery()
        )
        query = query.where(Endpoint.customer_id == scope.customer_id, Endpoint.created_at >= life)
    return query


async def in_scope(session: AsyncSession, scope: Scope, endpoint_id: str) -> bool:
    """Whether the endpoint, deleted or not, is the scope's (``ids_in_scope``)."""
    query = ids_in_scope(scope).where(Endpoint.id == endpoint_id)
    return (await session.execute(query)).scalar_one_or_none() is not None


async def delete_all_of(session: AsyncSession, scope: Scope) -> list[Endpoint]:
    """Soft-delete every live endpoint in the scope (a deleted customer's)."""
    deleted = update(Endpoint).where(*_owned(scope)).values(_DELETED)
    result = await session.execute(
        deleted.returning(Endpoint).execution_options(populate_existing=True)
    )
    return list(result.scalars())
