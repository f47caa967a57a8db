"""Every API call once: its method, path, body and how to read the answer. The sync and async
clients only execute these (``_transport``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from pydantic import TypeAdapter

from herald_client.models import (
    Attempt,
    Customer,
    Delivery,
    DeliveryDetail,
    Endpoint,
    EndpointCreated,
    Event,
    EventAccepted,
    Limits,
    Page,
    PollAcknowledged,
    PolledDelivery,
    PortalSession,
    PortalSessionListed,
    RedriveJob,
    SessionsRevoked,
    Stream,
)

T = TypeVar("T")

# A long poll's answer may take its wait and then this long.
POLL_ANSWER_SECONDS = 10.0


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    read: Callable[[Any], T]
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    # Safe to send again after a lost connection (it may have been done): a read, an
    # idempotent change, or a keyed accept. (After a 429 or a 503 every call is sent again:
    # Herald did nothing.)
    repeatable: bool = True
    # Send an Idempotency-Key: this one, or a fresh one per call (kept across its retries).
    keyed: bool = False
    idempotency_key: str | None = None
    # Seconds to wait for the answer, when not the client's own: a long poll's wait and more.
    timeout: float | None = None


def _model(model: type[T]) -> Callable[[Any], T]:
    adapter = TypeAdapter(model)
    return adapter.validate_python


def _nothing(_: Any) -> None:
    return None


def _present(**values: Any) -> dict[str, Any]:
    return {name: value for name, value in values.items() if value is not None}


def _when(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


# Deliveries


def create_delivery(
    endpoint_id: str,
    event_type: str,
    payload: dict[str, Any],
    *,
    deliver_after: datetime | None,
    idempotency_key: str | None,
    ordering_key: str | None = None,
) -> Call[Delivery]:
    body = _present(
        endpoint_id=endpoint_id,
        event_type=event_type,
        payload=payload,
        deliver_after=_when(deliver_after),
        ordering_key=ordering_key,
    )
    return Call(
        "POST",
        "/v1/deliveries",
        _model(Delivery),
        json=body,
        keyed=True,
        idempotency_key=idempotency_key,
    )


def get_delivery(delivery_id: str) -> Call[DeliveryDetail]:
    return Call("GET", f"/v1/deliveries/{delivery_id}", _model(DeliveryDetail))


def list_deliveries(**filters: Any) -> Call[Page[Delivery]]:
    return Call("GET", "/v1/deliveries", _model(Page[Delivery]), params=_present(**filters))


def list_attempts(
    delivery_id: str, *, limit: int | None, cursor: str | None
) -> Call[Page[Attempt]]:
    return Call(
        "GET",
        f"/v1/deliveries/{delivery_id}/attempts",
        _model(Page[Attempt]),
        params=_present(limit=limit, cursor=cursor),
    )


def cancel_delivery(delivery_id: str) -> Call[Delivery]:
    # Cancelling twice answers the same: repeatable.
    return Call("POST", f"/v1/deliveries/{delivery_id}/cancel", _model(Delivery))


def redrive_delivery(delivery_id: str) -> Call[Delivery]:
    # A second redrive of a delivery the first one revived is a 409: not repeated blindly.
    return Call("POST", f"/v1/deliveries/{delivery_id}/redrive", _model(Delivery), repeatable=False)


def retry_delivery_now(delivery_id: str) -> Call[Delivery]:
    # A second one finds the delivery due already: a 409, so not repeated blindly.
    return Call("POST", f"/v1/deliveries/{delivery_id}/retry", _model(Delivery), repeatable=False)


def skip_delivery(delivery_id: str) -> Call[Delivery]:
    # A second skip finds the stream moved on: a 409, so not repeated blindly.
    return Call("POST", f"/v1/deliveries/{delivery_id}/skip", _model(Delivery), repeatable=False)


def bulk_redrive(**wanted: Any) -> Call[RedriveJob]:
    body = {name: _when(v) if isinstance(v, datetime) else v for name, v in wanted.items()}
    return Call(
        "POST",
        "/v1/deliveries/redrive",
        _model(RedriveJob),
        json=_present(**body),
        repeatable=False,
    )


# Events


def publish_event(
    event_type: str,
    payload: dict[str, Any],
    *,
    deliver_after: datetime | None,
    idempotency_key: str | None,
    ordering_key: str | None = None,
    customer_id: str | None = None,
) -> Call[EventAccepted]:
    body = _present(
        event_type=event_type,
        payload=payload,
        customer_id=customer_id,
        deliver_after=_when(deliver_after),
        ordering_key=ordering_key,
    )
    return Call(
        "POST",
        "/v1/events",
        _model(EventAccepted),
        json=body,
        keyed=True,
        idempotency_key=idempotency_key,
    )


def get_event(event_id: str) -> Call[Event]:
    return Call("GET", f"/v1/events/{event_id}", _model(Event))


# Endpoints


def create_endpoint(fields: dict[str, Any]) -> Call[EndpointCreated]:
    # Not keyed (the route takes no key): a retry after a lost answer could make a second one.
    return Call(
        "POST", "/v1/endpoints", _model(EndpointCreated), json=_present(**fields), repeatable=False
    )


def get_endpoint(endpoint_id: str) -> Call[Endpoint]:
    return Call("GET", f"/v1/endpoints/{endpoint_id}", _model(Endpoint))


def list_endpoints(*, limit: int | None, cursor: str | None) -> Call[Page[Endpoint]]:
    params = _present(limit=limit, cursor=cursor)
    return Call("GET", "/v1/endpoints", _model(Page[Endpoint]), params=params)


def list_streams(
    endpoint_id: str, *, halted: bool, limit: int | None, cursor: str | None
) -> Call[Page[Stream]]:
    params = _present(halted="true" if halted else None, limit=limit, cursor=cursor)
    return Call("GET", f"/v1/endpoints/{endpoint_id}/streams", _model(Page[Stream]), params=params)


def update_endpoint(endpoint_id: str, changes: dict[str, Any]) -> Call[Endpoint]:
    # Setting fields to values is idempotent: repeatable. (None here means "set to null".)
    return Call("PATCH", f"/v1/endpoints/{endpoint_id}", _model(Endpoint), json=changes)


def delete_endpoint(endpoint_id: str) -> Call[None]:
    # A delete that went through answers 404 the second time: not sent again blindly.
    return Call("DELETE", f"/v1/endpoints/{endpoint_id}", _nothing, repeatable=False)


def rotate_secret(endpoint_id: str) -> Call[dict[str, Any]]:
    return Call(
        "POST",
        f"/v1/endpoints/{endpoint_id}/secret/rotate",
        _model(dict[str, Any]),
        repeatable=False,
    )


def test_endpoint(endpoint_id: str) -> Call[dict[str, Any]]:
    return Call(
        "POST", f"/v1/endpoints/{endpoint_id}/test", _model(dict[str, Any]), repeatable=False
    )


def send_test_event(endpoint_id: str, body: dict[str, Any]) -> Call[Delivery]:
    # Each call is a new delivery: not sent again blindly.
    return Call(
        "POST",
        f"/v1/endpoints/{endpoint_id}/test-events",
        _model(Delivery),
        json=body,
        repeatable=False,
    )


def poll_endpoint(
    endpoint_id: str, *, limit: int | None, wait: float | None, visibility: float | None
) -> Call[list[PolledDelivery]]:
    # Sent again after a lost answer: what the lost poll read comes back after its visibility.
    params = _present(limit=limit, wait=wait, visibility=visibility)
    return Call(
        "GET",
        f"/v1/endpoints/{endpoint_id}/poll",
        lambda body: _model(list[PolledDelivery])(body["data"]),
        params=params,
        timeout=None if not wait else wait + POLL_ANSWER_SECONDS,
    )


def acknowledge_polled(endpoint_id: str, receipts: list[str]) -> Call[PollAcknowledged]:
    # Acknowledging twice is harmless.
    return Call(
        "POST",
        f"/v1/endpoints/{endpoint_id}/poll/ack",
        _model(PollAcknowledged),
        json={"receipts": receipts},
    )


def try_transformation(endpoint_id: str, body: dict[str, Any]) -> Call[dict[str, Any]]:
    # Nothing is saved or sent: asking again is harmless.
    return Call(
        "POST",
        f"/v1/endpoints/{endpoint_id}/transformation/test",
        _model(dict[str, Any]),
        json=body,
    )


def rotate_signing_key(endpoint_id: str) -> Call[dict[str, Any]]:
    return Call(
        "POST",
        f"/v1/endpoints/{endpoint_id}/signing-key/rotate",
        _model(dict[str, Any]),
        repeatable=False,
    )


def put_customer(customer_id: str, name: str | None) -> Call[Customer]:
    body = _present(name=name)
    return Call("PUT", f"/v1/customers/{quote(customer_id, safe='')}", _model(Customer), body)


def get_customer(customer_id: str) -> Call[Customer]:
    return Call("GET", f"/v1/customers/{quote(customer_id, safe='')}", _model(Customer))


def list_customers(*, limit: int | None, cursor: str | None) -> Call[Page[Customer]]:
    params = _present(limit=limit, cursor=cursor)
    return Call("GET", "/v1/customers", _model(Page[Customer]), params=params)


def delete_customer(customer_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/customers/{quote(customer_id, safe='')}", _nothing)


def create_portal_session(
    customer_id: str, capabilities: list[str], lifetime_seconds: int | None
) -> Call[PortalSession]:
    body = _present(
        customer_id=customer_id, capabilities=capabilities, lifetime_seconds=lifetime_seconds
    )
    # Not repeatable: a lost answer may have minted one; minting another is the caller's call.
    return Call("POST", "/v1/portal-sessions", _model(PortalSession), body, repeatable=False)


def list_portal_sessions(
    *, customer_id: str | None, api_key_id: str | None, limit: int | None, cursor: str | None
) -> Call[Page[PortalSessionListed]]:
    params = _present(customer_id=customer_id, api_key_id=api_key_id, limit=limit, cursor=cursor)
    return Call("GET", "/v1/portal-sessions", _model(Page[PortalSessionListed]), params=params)


def revoke_portal_session(session_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/portal-sessions/{session_id}", _nothing)


def revoke_portal_sessions(
    *, customer_id: str | None, api_key_id: str | None
) -> Call[SessionsRevoked]:
    # Ending the same sessions again changes nothing (it counts none): repeatable.
    body = _present(customer_id=customer_id, api_key_id=api_key_id)
    return Call("POST", "/v1/portal-sessions/revoke", _model(SessionsRevoked), body)


# Limits


def own_limits() -> Call[Limits]:
    return Call("GET", "/v1/limits", _model(Limits))


def tenant_limits(tenant_id: str) -> Call[Limits]:
    return Call("GET", f"/v1/tenants/{quote(tenant_id, safe='')}/limits", _model(Limits))


def update_limits(tenant_id: str, changes: dict[str, Any]) -> Call[Limits]:
    # Setting limits to values is idempotent: repeatable. (None here means "the default".)
    path = f"/v1/tenants/{quote(tenant_id, safe='')}/limits"
    return Call("PATCH", path, _model(Limits), json=changes)
