"""Deliveries (``herald.deliveries``): accepting one, reading, cancelling, redriving and
skipping them, sync and async."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from herald_client import _calls
from herald_client.models import Attempt, Delivery, DeliveryDetail, Page, RedriveJob

if TYPE_CHECKING:
    from herald_client.client import AsyncHerald, Herald


class Deliveries:
    def __init__(self, client: Herald) -> None:
        self._run = client.run

    def create(
        self,
        endpoint_id: str,
        event_type: str,
        payload: dict[str, Any],
        *,
        deliver_after: datetime | None = None,
        idempotency_key: str | None = None,
        ordering_key: str | None = None,
    ) -> Delivery:
        """Accept one intent. Sends an Idempotency-Key (yours, or one made for this call) and
        retries 429/503 as Retry-After says: a retry never makes a second delivery.
        ``ordering_key``: its stream at an endpoint that orders by key."""
        return self._run(
            _calls.create_delivery(
                endpoint_id,
                event_type,
                payload,
                deliver_after=deliver_after,
                idempotency_key=idempotency_key,
                ordering_key=ordering_key,
            )
        )

    def get(self, delivery_id: str) -> DeliveryDetail:
        return self._run(_calls.get_delivery(delivery_id))

    def list(self, **filters: Any) -> Page[Delivery]:
        """Newest first; filters: state, endpoint_id, event_type, event_id, limit, cursor."""
        return self._run(_calls.list_deliveries(**filters))

    def attempts(
        self, delivery_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[Attempt]:
        return self._run(_calls.list_attempts(delivery_id, limit=limit, cursor=cursor))

    def cancel(self, delivery_id: str) -> Delivery:
        return self._run(_calls.cancel_delivery(delivery_id))

    def redrive(self, delivery_id: str) -> Delivery:
        return self._run(_calls.redrive_delivery(delivery_id))

    def retry_now(self, delivery_id: str) -> Delivery:
        """Try a delivery that waits for its next attempt now, not when its backoff says."""
        return self._run(_calls.retry_delivery_now(delivery_id))

    def skip(self, delivery_id: str) -> Delivery:
        """Move a halted stream past its dead head (the delivery given)."""
        return self._run(_calls.skip_delivery(delivery_id))

    def bulk_redrive(self, **wanted: Any) -> RedriveJob:
        """endpoint_id, event_type, states (["dead"], or "succeeded" to replay), dead_after,
        dead_before."""
        return self._run(_calls.bulk_redrive(**wanted))


class AsyncDeliveries:
    def __init__(self, client: AsyncHerald) -> None:
        self._run = client.run

    async def create(
        self,
        endpoint_id: str,
        event_type: str,
        payload: dict[str, Any],
        *,
        deliver_after: datetime | None = None,
        idempotency_key: str | None = None,
        ordering_key: str | None = None,
    ) -> Delivery:
        return await self._run(
            _calls.create_delivery(
                endpoint_id,
                event_type,
                payload,
                deliver_after=deliver_after,
                idempotency_key=idempotency_key,
                ordering_key=ordering_key,
            )
        )

    async def get(self, delivery_id: str) -> DeliveryDetail:
        return await self._run(_calls.get_delivery(delivery_id))

    async def list(self, **filters: Any) -> Page[Delivery]:
        return await self._run(_calls.list_deliveries(**filters))

    async def attempts(
        self, delivery_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[Attempt]:
        return await self._run(_calls.list_attempts(delivery_id, limit=limit, cursor=cursor))

    async def cancel(self, delivery_id: str) -> Delivery:
        return await self._run(_calls.cancel_delivery(delivery_id))

    async def redrive(self, delivery_id: str) -> Delivery:
        return await self._run(_calls.redrive_delivery(delivery_id))

    async def retry_now(self, delivery_id: str) -> Delivery:
        return await self._run(_calls.retry_delivery_now(delivery_id))

    async def skip(self, delivery_id: str) -> Delivery:
        return await self._run(_calls.skip_delivery(delivery_id))

    async def bulk_redrive(self, **wanted: Any) -> RedriveJob:
        return await self._run(_calls.bulk_redrive(**wanted))
