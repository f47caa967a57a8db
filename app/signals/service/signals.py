"""What a caller's act tells the tenant: an endpoint created, changed or deleted, written in
the act's own transaction (the triggers of migration 0045 write the rest). And the relay's
access to the table: a page claimed, then deleted once its events are accepted."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from app.signals.repository import signals

# The relay's reads and deletes (app/delivery/service/operational_events.py).
from app.signals.repository.signals import claim_page as claim_page
from app.signals.repository.signals import delete_told as delete_told


class Subject(Protocol):
    """What a signal needs of an endpoint (app.models.Endpoint is one)."""

    id: str
    tenant_id: str
    customer_id: str | None
    url: str | None  # None: a polling endpoint
    description: str | None
    event_types: list[str] | None
    enabled: bool


def _about(endpoint: Subject) -> dict[str, object]:
    return {"endpoint_id": endpoint.id, "customer_id": endpoint.customer_id, "url": endpoint.url}


async def endpoint_created(session: AsyncSession, endpoint: Subject) -> None:
    await signals.insert(
        session,
        endpoint.tenant_id,
        "herald.endpoint.created",
        {
            **_about(endpoint),
            "description": endpoint.description,
            "event_types": endpoint.event_types,
            "enabled": endpoint.enabled,
        },
    )


async def endpoint_updated(
    session: AsyncSession, endpoint: Subject, changed: Iterable[str]
) -> None:
    fields = sorted(set(changed))
    if fields:
        await signals.insert(
            session,
            endpoint.tenant_id,
            "herald.endpoint.updated",
            {**_about(endpoint), "changed": fields},
        )


async def endpoint_deleted(session: AsyncSession, endpoint: Subject) -> None:
    await signals.insert(session, endpoint.tenant_id, "herald.endpoint.deleted", _about(endpoint))
