"""Test events: a delivery like any other -- accepted, attempted, retried, in the log with its
attempts, replayable -- to one endpoint, of a type its sender picks from the catalogue, with
the type's example payload (or one it gives). The connection check (endpoint_tester.py) is the
other test: sent at once, reported step by step, and kept nowhere."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.catalogue.service import event_types
from app.catalogue.service.payload_schemas import PayloadSchemas
from app.core.config import Settings
from app.core.errors import Forbidden, Unprocessable
from app.core.fields import is_herald_type
from app.core.ids import new_id
from app.core.scope import Scope
from app.delivery.schemas import DeliveryOut, TestEventRequest
from app.delivery.service.intake import Accepted, encode_payload, insert_intent
from app.endpoints.service.endpoints import get_live, refusal_for

# The type of a test event when none is picked: in no catalogue, matched by no schema.
TEST_EVENT_TYPE = "herald.test"


async def accept_test_event(
    session: AsyncSession,
    settings: Settings,
    scope: Scope,
    endpoint_id: str,
    request: TestEventRequest,
    payload_schemas: PayloadSchemas,
    traceparent: str | None = None,
) -> Accepted:
    """The test event and its one delivery, in the caller's transaction. It goes to the named
    endpoint whatever the endpoint subscribes to (it is asked for by name) and belongs to the
    endpoint's customer, as the endpoint does."""
    if is_herald_type(request.event_type) and request.event_type != TEST_EVENT_TYPE:
        raise Unprocessable(
            f"{request.event_type} is one of Herald's own event types, which only Herald "
            f"sends: a test event is of a type in your catalogue, or {TEST_EVENT_TYPE}"
        )
    endpoint = await get_live(session, scope, endpoint_id)
    if (refused := refusal_for(endpoint_id, endpoint)) is not None:
        raise refused
    assert endpoint is not None
    if scope.customer_id is not None and request.payload is not None:
        # What a customer sends is a test of its receiver, not an event of its tenant's: the
        # tenant's example, or herald.test's own payload.
        raise Forbidden("a customer's test event carries its type's example payload: send none")
    payload = await _payload(session, scope.tenant_id, endpoint_id, request)
    encoded = encode_payload(payload, settings.max_payload_bytes)
    await payload_schemas.check(scope.tenant_id, request.event_type, payload, len(encoded))
    event_id = new_id("evt")
    rows, publications = await insert_intent(
        session,
        settings,
        tenant_id=scope.tenant_id,
        event_id=event_id,
        customer_id=endpoint.customer_id,
        event_type=request.event_type,
        payload=encoded,
        endpoint_ids=[endpoint.id],
        filtered_out=[],
        deliver_after=None,
        ordering_key=None,
        traceparent=traceparent,
    )
    delivered = [DeliveryOut.model_validate(row) for row in rows]
    return Accepted(event_id, request.event_type, delivered, False, publications)


async def _payload(
    session: AsyncSession, tenant_id: str, endpoint_id: str, request: TestEventRequest
) -> dict[str, Any]:
    if request.event_type == TEST_EVENT_TYPE:
        if request.payload is not None:
            return request.payload
        sent_at = datetime.now(UTC).isoformat()
        return {"test": True, "endpoint_id": endpoint_id, "sent_at": sent_at}
    entry = await event_types.find_type(session, tenant_id, request.event_type)
    if entry is None:
        raise Unprocessable(
            f"event type {request.event_type} is not in the catalogue: a test event is of a "
            f"type in it, or {TEST_EVENT_TYPE}"
        )
    if request.payload is not None:
        return request.payload
    example = event_types.example_of(entry)
    if example is None:
        raise Unprocessable(
            f"event type {request.event_type} has no example payload in the catalogue: give "
            "the test a payload, or the type an example"
        )
    return example
