"""The ``operational_signals`` table: written (here for a caller's act, by the triggers of
migration 0045 for the rest), claimed a page at a time, deleted once told."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import OperationalSignal

# The triggers' own function, so that a signal written here is made as theirs are: only for a
# tenant with an operational endpoint, stamped by the database's clock.
_SIGNAL = text(
    "SELECT operational_signal(:tenant_id, :type, CAST(:body AS jsonb))"
    " WHERE operational_signals_wanted(:tenant_id)"
)


async def insert(session: AsyncSession, tenant_id: str, type_: str, body: dict[str, Any]) -> None:
    await session.execute(
        _SIGNAL, {"tenant_id": tenant_id, "type": type_, "body": json.dumps(body)}
    )


async def claim_page(session: AsyncSession, *, limit: int) -> list[OperationalSignal]:
    """The oldest signals no other relay holds, locked until the caller's transaction ends."""
    query = (
        select(OperationalSignal)
        .order_by(OperationalSignal.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return list((await session.execute(query)).scalars())


async def delete_told(session: AsyncSession, ids: Sequence[int]) -> None:
    await session.execute(delete(OperationalSignal).where(OperationalSignal.id.in_(ids)))
