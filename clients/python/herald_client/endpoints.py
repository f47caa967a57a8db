"""Endpoints (``herald.endpoints``): making, changing, testing and deleting them, their
secrets rotated and their streams listed, sync and async."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from herald_client import _calls
from herald_client.models import (
    Delivery,
    Endpoint,
    EndpointCreated,
    Page,
    PollAcknowledged,
    PolledDelivery,
    Stream,
)

if TYPE_CHECKING:
    from herald_client.client import AsyncHerald, Herald


class Endpoints:
    def __init__(self, client: Herald) -> None:
        self._run = client.run

    def create(self, url: str | None = None, **fields: Any) -> EndpointCreated:
        """Fields: delivery (push, the default, sent to ``url``; or poll: no url, its
        receiver reads with ``poll``), description, event_types, filter, transformation,
        rate_limit_per_second, max_in_flight, enabled, payload_format (raw, standard,
        cloudevents, cloudevents-binary), signature_schemes (v1, v1a), headers,
        secret_headers (sent like headers, sealed at rest, shown by name only), oauth2, tls
        (mutual TLS: client_certificate, client_key, ca_bundle, overlap_hours), egress_proxy
        ({"url": ...}), webhook_handshake (the CloudEvents validation handshake before the
        save), ordering, on_dead. The answer holds the signing secret and the v1a public
        key."""
        return self._run(_calls.create_endpoint({"url": url, **fields}))

    def poll(
        self,
        endpoint_id: str,
        *,
        limit: int | None = None,
        wait: float | None = None,
        visibility: float | None = None,
    ) -> list[PolledDelivery]:
        """A polling endpoint's due deliveries, up to ``limit`` (100), each hidden from other
        polls for ``visibility`` seconds (30) unless acknowledged; with ``wait``, waits up to
        that long (at most 20 s) when none is due. Verify each one's ``headers`` against its
        ``body`` (``herald_client.receiving``), then ``acknowledge`` its receipt."""
        return self._run(
            _calls.poll_endpoint(endpoint_id, limit=limit, wait=wait, visibility=visibility)
        )

    def acknowledge(self, endpoint_id: str, receipts: list[str]) -> PollAcknowledged:
        """Each receipt's delivery succeeds, while its read is still visible to no one else;
        an expired one comes back under the same id."""
        return self._run(_calls.acknowledge_polled(endpoint_id, receipts))

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

    def send_test_event(
        self, endpoint_id: str, event_type: str = "herald.test", payload: Any = None
    ) -> Delivery:
        """A test event kept in the log like any delivery: of a catalogue type, with its
        example payload unless ``payload`` is given (``herald.test``: a payload saying it is a
        test). Attempted, retried and replayable as any delivery is."""
        return self._run(_calls.send_test_event(endpoint_id, _test_event(event_type, payload)))

    def try_transformation(
        self,
        endpoint_id: str,
        event_type: str,
        transformation: str | None = None,
        payload: Any = None,
    ) -> dict[str, Any]:
        """What a delivery of this event would send through ``transformation`` (else the
        endpoint's own), on the catalogue's example unless ``payload`` is given: ``{"outcome":
        "sent" | "skipped" | "failed", "request": {"url", "headers", "body", "body_made"},
        "error", "bound_steps", ...}``. Nothing is saved or sent."""
        body = _trial(event_type, transformation, payload)
        return self._run(_calls.try_transformation(endpoint_id, body))

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

    async def create(self, url: str | None = None, **fields: Any) -> EndpointCreated:
        return await self._run(_calls.create_endpoint({"url": url, **fields}))

    async def poll(
        self,
        endpoint_id: str,
        *,
        limit: int | None = None,
        wait: float | None = None,
        visibility: float | None = None,
    ) -> list[PolledDelivery]:
        return await self._run(
            _calls.poll_endpoint(endpoint_id, limit=limit, wait=wait, visibility=visibility)
        )

    async def acknowledge(self, endpoint_id: str, receipts: list[str]) -> PollAcknowledged:
        return await self._run(_calls.acknowledge_polled(endpoint_id, receipts))

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

    async def send_test_event(
        self, endpoint_id: str, event_type: str = "herald.test", payload: Any = None
    ) -> Delivery:
        body = _test_event(event_type, payload)
        return await self._run(_calls.send_test_event(endpoint_id, body))

    async def try_transformation(
        self,
        endpoint_id: str,
        event_type: str,
        transformation: str | None = None,
        payload: Any = None,
    ) -> dict[str, Any]:
        body = _trial(event_type, transformation, payload)
        return await self._run(_calls.try_transformation(endpoint_id, body))

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


def _test_event(event_type: str, payload: Any) -> dict[str, Any]:
    return (
        {"event_type": event_type}
        if payload is None
        else {"event_type": event_type, "payload": payload}
    )


def _trial(event_type: str, transformation: str | None, payload: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"event_type": event_type}
    if transformation is not None:
        body["transformation"] = transformation
    if payload is not None:
        body["payload"] = payload
    return body
