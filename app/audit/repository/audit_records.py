"""The ``audit_records`` table: written in a change's transaction, read a page at a time."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import AuditRecord


async def insert_record(session: AsyncSession, **values: Any) -> None:
    await session.execute(insert(AuditRecord).values(**values))


async def list_page(
    session: AsyncSession,
    tenant_id: str,
    *,
    limit: int,
    before_id: str | None = None,
    subject_id: str | None = None,
    action: str | None = None,
) -> list[AuditRecord]:
    """The tenant's records, newest first, older than ``before_id`` (the cursor)."""
    query = select(AuditRecord).where(AuditRecord.tenant_id == tenant_id)
    if before_id is not None:
        query = query.where(AuditRecord.id < before_id)
    if subject_id is not None:
        query = query.where(AuditRecord.subject_id == subject_id)
    if action is not None:
        query = query.where(AuditRecord.action == action)
    ordered = query.order_by(AuditRecord.id.desc()).limit(limit)
    return list((await session.execute(ordered)).scalars())
