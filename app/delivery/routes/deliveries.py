from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from app.api.deps import (
    READ_LAG_DOC,
    IdempotencyKeyDep,
    ReaderDep,
    ReadScopeDep,
    SessionDep,
    SettingsDep,
    TenantDep,
    TraceparentDep,
    authenticate,
    idempotency_key_from,
    tenant_of,
)
from app.api.pagination import Cursor, Limit, Page, decode_id_cursor, decode_number_cursor, page_of
from app.api.paths import DeliveryIdPath
from app.api.problems import problem_responses
from app.api.served import json_body, json_response, resources_of, served_by, validated
from app.core import tracing
from app.core.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    IdempotencyMismatch,
    NotFound,
    PayloadTooLarge,
    TooManyRequests,
    Unauthorized,
    UnsupportedMediaType,
)
from app.core.faults import crash_point
from app.core.fields import EndpointId, EventId, EventTypeSelector
from app.core.states import DeliveryState
from app.delivery.schemas import (
    AttemptOut,
    BatchAccepted,
    BatchIntents,
    DeliveryDetail,
    DeliveryIntent,
    DeliveryOut,
)
from app.delivery.service import batch_intake, intake, listings, status_facts
from app.runtime.resources import PublisherDep, ResourcesDep

router = APIRouter(prefix="/v1/deliveries", tags=["deliveries"])
_AUTH = (Unauthorized, Forbidden)
REPLAYED_HEADER = "Idempotent-Replayed"


async def create_delivery(
    intent: DeliveryIntent,
    tenant_id: TenantDep,
    resources: ResourcesDep,
    settings: SettingsDep,
    idempotency_key: IdempotencyKeyDep,
    publisher: PublisherDep,
    response: Response,
    traceparent: TraceparentDep,
) -> DeliveryOut:
    await resources.accept_rates.admit(tenant_id)
    await resources.partitions.ready()
    # Nearly every accept is one statement -- key, event, delivery, outbox row -- and that
    # statement is the commit.
    crash_point("api.before_commit", settings.fault)
    accepted = await intake.accept_delivery_at_once(
        resources.sessionmaker,
        settings,
        tenant_id,
        intent,
        idempotency_key,
        resources.payload_schemas,
        traceparent,
    )
    if accepted is None:
        # A key held by an earlier request, or a refusal, is answered in a transaction that
        # reads the key first.
        async with resources.sessionmaker() as session, session.begin():
            accepted = await intake.accept_delivery(
                session,
                settings,
                tenant_id,
                intent,
                idempotency_key,
                resources.payload_schemas,
                traceparent,
            )
    delivery = accepted.deliveries[0]
    if accepted.replayed:
        response.status_code = 200
        response.headers[REPLAYED_HEADER] = "true"
    else:
        crash_point("api.after_commit_before_publish", settings.fault)
        publisher.submit(accepted.publications)
    response.headers["Location"] = f"/v1/deliveries/{delivery.id}"
    return delivery


async def _serve_create_delivery(request: Request) -> Response:
    """``create_delivery``'s parameters resolved by hand, in the order FastAPI resolves them."""
    body = await json_body(request)
    resources = resources_of(request)
    tenant_id = tenant_of(await authenticate(resources, request.headers.get("authorization")))
    idempotency_key = idempotency_key_from(request.headers.get("idempotency-key"))
    intent = validated(DeliveryIntent, body)
    response = Response(status_code=202)
    with tracing.accepting(request.headers) as traceparent:
        delivery = await create_delivery(
            intent,
            tenant_id,
            resources,
            resources.settings,
            idempotency_key,
            resources.publisher,
            response,
            traceparent,
        )
    del response.headers["content-length"]
    return json_response(delivery, response.status_code, dict(response.headers))


router.add_api_route(
    "",
    create_delivery,
    methods=["POST"],
    route_class_override=served_by(_serve_create_delivery),
    status_code=202,
    response_model=DeliveryOut,
    responses={
        200: {"model": DeliveryOut, "description": "Replay of an earlier request with this key"},
        **problem_responses(
            *_AUTH,
            BadRequest,
            NotFound,
            Conflict,
            PayloadTooLarge,
            UnsupportedMediaType,
            IdempotencyMismatch,
            TooManyRequests,
        ),
    },
    summary="Accept a delivery intent",
)


@router.post(
    "/batch",
    response_model=BatchAccepted,
    responses=problem_responses(*_AUTH, PayloadTooLarge, UnsupportedMediaType, TooManyRequests),
    summary="Accept up to 1000 delivery intents in one transaction, each judged on its own",
)
async def create_deliveries_batch(
    batch: BatchIntents,
    tenant_id: TenantDep,
    session: SessionDep,
    settings: SettingsDep,
    publisher: PublisherDep,
    resources: ResourcesDep,
    traceparent: TraceparentDep,
) -> Response:
    await resources.accept_rates.admit(tenant_id, len(batch.items))
    await resources.partitions.ready()
    async with session.begin():  # every accepted item with its event and outbox row, or none
        outcomes, publications = await batch_intake.accept_batch(
            session, settings, tenant_id, batch.items, resources.payload_schemas, traceparent
        )
        crash_point("api.before_commit", settings.fault)
    publisher.submit(publications)
    return Response(await batch_intake.answer(outcomes), media_type="application/json")


@router.get(
    "",
    response_model=Page[DeliveryOut],
    responses={**problem_responses(*_AUTH), **READ_LAG_DOC},
    summary="List deliveries, newest first",
)
async def list_deliveries(
    scope: ReadScopeDep,
    read: ReaderDep,
    state: DeliveryState | None = None,
    endpoint_id: Annotated[EndpointId | None, Query()] = None,
    event_type: Annotated[EventTypeSelector | None, Query()] = None,
    event_id: Annotated[
        EventId | None, Query(description="Only the deliveries of this event.")
    ] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Page[DeliveryOut]:
    before_id = decode_id_cursor(cursor, "dlv")
    rows = await read(
        lambda session: listings.list_deliveries(
            session,
            scope,
            limit=limit + 1,
            before_id=before_id,
            state=state,
            endpoint_id=endpoint_id,
            event_type=event_type,
            event_id=event_id,
        )
    )
    return page_of(rows, limit, DeliveryOut.model_validate, lambda item: item.id)


@router.get(
    "/{delivery_id}",
    response_model=DeliveryDetail,
    responses={**problem_responses(*_AUTH, NotFound), **READ_LAG_DOC},
    summary="A delivery: its state, why it is waiting, and its custody timeline",
)
async def get_delivery(
    scope: ReadScopeDep, delivery_id: DeliveryIdPath, read: ReaderDep, resources: ResourcesDep
) -> DeliveryDetail:
    return await read(
        lambda session: status_facts.delivery_detail(
            session, resources.redis, resources.settings, scope, delivery_id
        )
    )


@router.get(
    "/{delivery_id}/attempts",
    response_model=Page[AttemptOut],
    responses={**problem_responses(*_AUTH, NotFound), **READ_LAG_DOC},
    summary="A delivery's attempt log, oldest first",
)
async def list_attempts(
    scope: ReadScopeDep,
    delivery_id: DeliveryIdPath,
    read: ReaderDep,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Page[AttemptOut]:
    after = decode_number_cursor(cursor)
    rows = await read(
        lambda session: listings.attempts_page(
            session, scope, delivery_id, limit=limit + 1, after_number=after
        )
    )
    return page_of(rows, limit, AttemptOut.model_validate, lambda item: item.attempt_number)
