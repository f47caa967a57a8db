from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.deps import (
    READ_LAG_DOC,
    IdempotencyKeyDep,
    ReaderDep,
    SessionDep,
    SettingsDep,
    TenantDep,
    TraceparentDep,
)
from app.api.paths import EventIdPath
from app.api.problems import problem_responses
from app.core.errors import (
    BadRequest,
    Forbidden,
    IdempotencyMismatch,
    NotFound,
    PayloadTooLarge,
    TooManyRequests,
    Unauthorized,
    UnsupportedMediaType,
)
from app.core.faults import crash_point
from app.delivery.routes.deliveries import REPLAYED_HEADER
from app.delivery.schemas import EventAccepted, EventIntent, EventOut, FanoutDelivery
from app.delivery.service import event_detail, intake
from app.runtime.resources import PublisherDep, ResourcesDep

router = APIRouter(prefix="/v1/events", tags=["events"])


@router.post(
    "",
    status_code=202,
    response_model=EventAccepted,
    responses={
        200: {"model": EventAccepted, "description": "Replay of an earlier request with this key"},
        **problem_responses(
            Unauthorized,
            Forbidden,
            BadRequest,
            PayloadTooLarge,
            UnsupportedMediaType,
            IdempotencyMismatch,
            TooManyRequests,
        ),
    },
    summary="Publish an event to every subscribed endpoint",
)
async def publish_event(
    intent: EventIntent,
    tenant_id: TenantDep,
    session: SessionDep,
    settings: SettingsDep,
    idempotency_key: IdempotencyKeyDep,
    publisher: PublisherDep,
    resources: ResourcesDep,
    response: Response,
    traceparent: TraceparentDep,
) -> EventAccepted:
    await resources.accept_rates.admit(tenant_id)
    await resources.partitions.ready()
    async with session.begin():  # the event and all its deliveries and outbox rows, atomically
        accepted = await intake.accept_event(
            session,
            settings,
            tenant_id,
            intent,
            idempotency_key,
            resources.payload_schemas,
            traceparent,
        )
        crash_point("api.before_commit", settings.fault)
    if accepted.replayed:
        response.status_code = 200
        response.headers[REPLAYED_HEADER] = "true"
    else:
        crash_point("api.after_commit_before_publish", settings.fault)
        publisher.submit(accepted.publications)
    return EventAccepted(
        id=accepted.event_id,
        event_type=accepted.event_type,
        deliveries=[
            FanoutDelivery(id=d.id, endpoint_id=d.endpoint_id) for d in accepted.deliveries
        ],
        filtered_out=accepted.filtered_out,
    )


@router.get(
    "/{event_id}",
    response_model=EventOut,
    responses={**problem_responses(Unauthorized, Forbidden, NotFound), **READ_LAG_DOC},
    summary="An event as accepted, and the state of each delivery it became",
)
async def get_event(tenant_id: TenantDep, event_id: EventIdPath, read: ReaderDep) -> EventOut:
    return await read(lambda session: event_detail.event_detail(session, tenant_id, event_id))
