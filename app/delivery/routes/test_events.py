"""``POST /v1/endpoints/{id}/test-events``: a test event, kept in the log like any delivery.
Beside the endpoint's connection check (``POST /v1/endpoints/{id}/test``), which is sent at
once and kept nowhere."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.deps import ManageScopeDep, TraceparentDep
from app.api.paths import EndpointIdPath
from app.api.problems import problem_responses
from app.core.errors import (
    Conflict,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
    UnsupportedMediaType,
)
from app.delivery.schemas import DeliveryOut, TestEventRequest
from app.delivery.service import test_events
from app.runtime.resources import ResourcesDep

router = APIRouter(prefix="/v1/endpoints", tags=["endpoints"])


@router.post(
    "/{endpoint_id}/test-events",
    status_code=202,
    response_model=DeliveryOut,
    responses=problem_responses(
        Unauthorized,
        Forbidden,
        NotFound,
        Conflict,
        PayloadTooLarge,
        UnsupportedMediaType,
        TooManyRequests,
        ServiceUnavailable,
    ),
    summary="Send a test event of a catalogue type to the endpoint, as a delivery in its log",
)
async def send_test_event(
    scope: ManageScopeDep,
    endpoint_id: EndpointIdPath,
    resources: ResourcesDep,
    response: Response,
    traceparent: TraceparentDep,
    request: TestEventRequest | None = None,
) -> DeliveryOut:
    """Accepted like any intent, then attempted, retried and recorded like one: its attempts,
    status and replay are the delivery's. Counted against the tenant's test events a minute
    as well as its accept rate."""
    await resources.tester.admit(
        resources.redis, scope.tenant_id, "test events", customer=scope.customer_id or ""
    )
    await resources.accept_rates.admit(scope.tenant_id)
    await resources.partitions.ready()
    async with resources.sessionmaker() as session, session.begin():
        accepted = await test_events.accept_test_event(
            session,
            resources.settings,
            scope,
            endpoint_id,
            request or TestEventRequest(),
            resources.payload_schemas,
            traceparent,
        )
    resources.publisher.submit(accepted.publications)  # after the commit, as every accept's
    delivery = accepted.deliveries[0]
    response.headers["Location"] = f"/v1/deliveries/{delivery.id}"
    return delivery
