"""Events (``herald.events``): publishing one to every subscribed endpoint, and reading it,
sync and async."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from herald_client import _calls
from herald_client.models import Event, EventAccepted

if TYPE_CHECKING:
    from herald_client.client import AsyncHerald, Herald


class Events:
    def __init__(self, client: Herald) -> None:
        self._run = client.run

    def publish(
        self,
        event_type: str,
        payload: dict[str, Any],
        *,
        deliver_after: datetime | None = None,
        idempotency_key: str | None = None,
        ordering_key: str | None = None,
        customer_id: str | None = None,
    ) -> EventAccepted:
        """Fan out to every subscribed endpoint (of ``customer_id``, or of no customer); keyed and
        retried like deliveries.create."""
        return self._run(
            _calls.publish_event(
                event_type,
                payload,
                deliver_after=deliver_after,
                idempotency_key=idempotency_key,
                ordering_key=ordering_key,
                customer_id=customer_id,
            )
        )

    def get(self, event_id: str) -> Event:
        return self._run(_calls.get_event(event_id))


class AsyncEvents:
    def __init__(self, client: AsyncHerald) -> None:
        self._run = client.run

    async def publish(
        self,
        event_type: str,
        payload: dict[str, Any],
        *,
        deliver_after: datetime | None = None,
        idempotency_key: str | None = None,
        ordering_key: str | None = None,
        customer_id: str | None = None,
    ) -> EventAccepted:
        return await self._run(
            _calls.publish_event(
                event_type,
                payload,
                deliver_after=deliver_after,
                idempotency_key=idempotency_key,
                ordering_key=ordering_key,
                customer_id=customer_id,
            )
        )

    async def get(self, event_id: str) -> Event:
        return await self._run(_calls.get_event(event_id))
