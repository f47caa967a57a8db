"""``Herald`` (sync) and ``AsyncHerald``: the same calls (``_calls``), run by httpx."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any, TypeVar

import httpx

from herald_client import _calls
from herald_client._calls import Call
from herald_client._transport import answer, headers_for, key_for, next_wait
from herald_client.customers import (
    AsyncCustomers,
    AsyncPortalSessions,
    Customers,
    PortalSessions,
)
from herald_client.limits import AsyncOwnLimits, AsyncTenants, OwnLimits, Tenants
from herald_client.models import (
    Attempt,
    Delivery,
    DeliveryDetail,
    Endpoint,
    EndpointCreated,
    Event,
    EventAccepted,
    Page,
    RedriveJob,
    Stream,
)

T = TypeVar("T")


class _Settings:
    def __init__(self, api_key: str, max_retries: int, max_retry_wait: float) -> None:
        self.api_key = api_key
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait


class Herald:
    """A Herald API client. ``max_retries`` bounds the retries of a repeatable call on 429,
    503 or a lost connection; each waits what ``Retry-After`` says, at most ``max_retry_wait``."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 10.0,
        max_retries: int = 4,
        max_retry_wait: float = 60.0,
        http: httpx.Client | None = None,
    ) -> None:
        self._http = http or httpx.Client(base_url=base_url, timeout=timeout)
        self._settings = _Settings(api_key, max_retries, max_retry_wait)
        self.deliveries = Deliveries(self)
        self.events = Events(self)
        self.endpoints = Endpoints(self)
        self.customers = Customers(self)
        self.portal_sessions = PortalSessions(self)
        self.limits = OwnLimits(self)
        self.tenants = Tenants(self)  # admin keys only

    def run(self, call: Call[T]) -> T:
        s, key = self._settings, key_for(call)
        attempt = 0
        while True:
            response: httpx.Response | None
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    json=call.json,
                    params=call.params or None,
                    headers=headers_for(call, s.api_key, key),
                )
            except httpx.TransportError:
                response = None
                wait = next_wait(call, None, attempt, s.max_retries, s.max_retry_wait)
                if wait is None:
                    raise
            else:
                wait = next_wait(call, response, attempt, s.max_retries, s.max_retry_wait)
                if wait is None:
                    return answer(call, response)
            time.sleep(wait)
            attempt += 1

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Herald:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class AsyncHerald:
    """``Herald`` for asyncio: the same calls, awaited."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 10.0,
        max_retries: int = 4,
        max_retry_wait: float = 60.0,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self._http = http or httpx.AsyncClient(base_url=base_url, timeout=timeout)
        self._settings = _Settings(api_key, max_retries, max_retry_wait)
        self.deliveries = AsyncDeliveries(self)
        self.events = AsyncEvents(self)
        self.endpoints = AsyncEndpoints(self)
        self.customers = AsyncCustomers(self)
        self.portal_sessions = AsyncPortalSessions(self)
        self.limits = AsyncOwnLimits(self)
        self.tenants = AsyncTenants(self)  # admin keys only

    async def run(self, call: Call[T]) -> T:
        s, key = self._settings, key_for(call)
        attempt = 0
        while True:
            response: httpx.Response | None
            try:
                response = await self._http.request(
                    call.method,
                    call.path,
                    json=call.json,
                    params=call.params or None,
                    headers=headers_for(call, s.api_key, key),
                )
            except httpx.TransportError:
                response = None
                wait = next_wait(call, None, attempt, s.max_retries, s.max_retry_wait)
                if wait is None:
                    raise
            else:
                wait = next_wait(call, response, attempt, s.max_retries, s.max_retry_wait)
                if wait is None:
                    return answer(call, response)
            await asyncio.sleep(wait)
            attempt += 1

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncHerald:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()


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

    async def skip(self, delivery_id: str) -> Delivery:
        return await self._run(_calls.skip_delivery(delivery_id))

    async def bulk_redrive(self, **wanted: Any) -> RedriveJob:
        return await self._run(_calls.bulk_redrive(**wanted))


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


class Endpoints:
    def __init__(self, client: Herald) -> None:
        self._run = client.run

    def create(self, url: str, **fields: Any) -> EndpointCreated:
        """Fields: description, event_types, filter, rate_limit_per_second, max_in_flight,
        enabled, payload_format (raw, standard, cloudevents, cloudevents-binary),
        signature_schemes (v1, v1a), headers, secret_headers (sent like headers, sealed at
        rest, shown by name only), oauth2, tls (mutual TLS: client_certificate, client_key,
        ca_bundle, overlap_hours), egress_proxy ({"url": ...}), webhook_handshake (the
        CloudEvents validation handshake before the save), ordering, on_dead. The answer
        holds the signing secret and the v1a public key."""
        return self._run(_calls.create_endpoint({"url": url, **fields}))

    def get(self, endpoint_id: str) -> Endpoint:
        return self._run(_calls.get_endpoint(endpoint_id))

    def list(self, *, limit: int | None = None, cursor: str | None = None) -> Page[Endpoint]:
        return self._run(_calls.list_endpoints(limit=limit, cursor=cursor))

    def update(self, endpoint_id: str, **changes: Any) -> Endpoint:
        return self._run(_calls.update_endpoint(endpoint_id, changes))

    def delete(self, endpoint_id: str) -> None:
        self._run(_calls.delete_endpoint(endpoint_id))

    def rotate_secret(self, endpoint_id: str) -> dict[str, Any]:
        return self._run(_calls.rotate_secret(endpoint_id))

    def rotate_signing_key(self, endpoint_id: str) -> dict[str, Any]:
        """A new ed25519 pair for v1a: ``{"public_key", "previous_public_key_expires_at"}``."""
        return self._run(_calls.rotate_signing_key(endpoint_id))

    def test(self, endpoint_id: str) -> dict[str, Any]:
        """Send a signed test event now through the endpoint's whole path: ``{"delivered",
        "status_code", "duration_ms", "response_body", "steps": [{"step", "outcome",
        "detail"}]}``; nothing is stored. At most 10 a minute per tenant (429 past that)."""
        return self._run(_calls.test_endpoint(endpoint_id))

    def streams(
        self,
        endpoint_id: str,
        *,
        halted: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Stream]:
        """An ordered endpoint's streams with work (``halted``: only the halted ones), by
        ordering key: each one's head, depth and halt."""
        return self._run(
            _calls.list_streams(endpoint_id, halted=halted, limit=limit, cursor=cursor)
        )


class AsyncEndpoints:
    def __init__(self, client: AsyncHerald) -> None:
        self._run = client.run

    async def create(self, url: str, **fields: Any) -> EndpointCreated:
        return await self._run(_calls.create_endpoint({"url": url, **fields}))

    async def get(self, endpoint_id: str) -> Endpoint:
        return await self._run(_calls.get_endpoint(endpoint_id))

    async def list(self, *, limit: int | None = None, cursor: str | None = None) -> Page[Endpoint]:
        return await self._run(_calls.list_endpoints(limit=limit, cursor=cursor))

    async def update(self, endpoint_id: str, **changes: Any) -> Endpoint:
        return await self._run(_calls.update_endpoint(endpoint_id, changes))

    async def delete(self, endpoint_id: str) -> None:
        await self._run(_calls.delete_endpoint(endpoint_id))

    async def rotate_secret(self, endpoint_id: str) -> dict[str, Any]:
        return await self._run(_calls.rotate_secret(endpoint_id))

    async def rotate_signing_key(self, endpoint_id: str) -> dict[str, Any]:
        return await self._run(_calls.rotate_signing_key(endpoint_id))

    async def test(self, endpoint_id: str) -> dict[str, Any]:
        return await self._run(_calls.test_endpoint(endpoint_id))

    async def streams(
        self,
        endpoint_id: str,
        *,
        halted: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Stream]:
        return await self._run(
            _calls.list_streams(endpoint_id, halted=halted, limit=limit, cursor=cursor)
        )
