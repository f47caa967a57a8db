from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from app.api.deps import ActorDep, ManageScopeDep, ReadScopeDep, SessionDep, VisitorDep
from app.api.pagination import (
    Cursor,
    Limit,
    Page,
    decode_id_cursor,
    decode_stream_cursor,
    page_of,
    stream_position,
)
from app.api.paths import EndpointIdPath
from app.api.problems import problem_responses
from app.core.errors import (
    DestinationRefused,
    Forbidden,
    NotFound,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
    UnsupportedMediaType,
)
from app.core.fields import CustomerId
from app.core.scope import Scope
from app.delivery.service import endpoint_stats
from app.endpoints.schemas import (
    EndpointCreate,
    EndpointCreated,
    EndpointOut,
    EndpointSecret,
    EndpointStats,
    EndpointTestReport,
    EndpointUpdate,
    RotatedSecret,
    RotatedSigningKey,
)
from app.endpoints.service import (
    credentials,
    customer_fields,
    endpoints,
    handshakes,
    rotations,
)
from app.flow.service.flow_state import clear_flow_state, wake_destination
from app.runtime.resources import ResourcesDep
from app.streams.schemas import StreamOut
from app.streams.service import streams
from app.tenants.service import limits, tenants

router = APIRouter(prefix="/v1/endpoints", tags=["endpoints"])
_AUTH = (Unauthorized, Forbidden)


@router.post(
    "",
    status_code=201,
    response_model=EndpointCreated,
    responses=problem_responses(
        *_AUTH, UnsupportedMediaType, DestinationRefused, TooManyRequests, ServiceUnavailable
    ),
    summary="Register a destination",
)
async def create_endpoint(
    body: EndpointCreate,
    scope: ManageScopeDep,
    visitor: VisitorDep,
    by: ActorDep,
    session: SessionDep,
    resources: ResourcesDep,
    response: Response,
) -> EndpointCreated:
    customer_fields.check_customer_fields(scope, body)  # before any receiver is asked
    customer_fields.check_transforming(visitor, body)
    target = handshakes.for_create(body)
    consent = await resources.receiver_consent(scope, target)
    async with session.begin():
        created = await endpoints.create_endpoint(
            session,
            scope,
            body,
            resources.settings.destination_allowlist,
            resources.keys,
            consent,
            defaults=limits.Limits.defaults(resources.settings),
            by=by,
        )
    response.headers["Location"] = f"/v1/endpoints/{created.endpoint.id}"
    shown = EndpointOut.model_validate(created.endpoint).model_dump()
    return EndpointCreated(**shown, secret=created.secret)


@router.get(
    "",
    response_model=Page[EndpointOut],
    responses=problem_responses(*_AUTH),
    summary="List endpoints, newest first",
)
async def list_endpoints(
    scope: ReadScopeDep,
    session: SessionDep,
    customer_id: Annotated[
        CustomerId | None, Query(description="Only the endpoints of this customer.")
    ] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Page[EndpointOut]:
    if customer_id is not None:
        if scope.customer_id not in (None, customer_id):
            return Page(items=[], next_cursor=None)  # another customer's: none of them
        scope = Scope(scope.tenant_id, customer_id)
    async with session.begin():
        rows = await endpoints.list_endpoints(
            session, scope, limit=limit + 1, before_id=decode_id_cursor(cursor, "ep")
        )
    return page_of(rows, limit, EndpointOut.model_validate, lambda item: item.id)


@router.get(
    "/{endpoint_id}",
    response_model=EndpointOut,
    responses=problem_responses(*_AUTH, NotFound),
)
async def get_endpoint(
    scope: ReadScopeDep, endpoint_id: EndpointIdPath, session: SessionDep
) -> EndpointOut:
    async with session.begin():
        endpoint = await endpoints.get_endpoint(session, scope, endpoint_id)
    return EndpointOut.model_validate(endpoint)


@router.get(
    "/{endpoint_id}/stats",
    response_model=EndpointStats,
    responses=problem_responses(*_AUTH, NotFound),
    summary="Attempts and successes over the last hour and day; health, pause and breaker",
)
async def get_endpoint_stats(
    scope: ReadScopeDep, endpoint_id: EndpointIdPath, session: SessionDep
) -> EndpointStats:
    async with session.begin():
        return await endpoint_stats.endpoint_stats(session, scope, endpoint_id)


@router.get(
    "/{endpoint_id}/streams",
    response_model=Page[StreamOut],
    responses=problem_responses(*_AUTH, NotFound),
    summary="The endpoint's ordered streams with work or halted, by ordering key",
)
async def list_streams(
    scope: ReadScopeDep,
    endpoint_id: EndpointIdPath,
    session: SessionDep,
    halted: Annotated[bool, Query(description="Only the halted streams.")] = False,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Page[StreamOut]:
    async with session.begin():
        await endpoints.get_endpoint(session, scope, endpoint_id)  # the tenant's, or 404
        rows = await streams.page(
            session,
            endpoint_id,
            after=decode_stream_cursor(cursor),
            halted_only=halted,
            limit=limit + 1,
        )
    return page_of(
        rows, limit, StreamOut.model_validate, lambda item: stream_position(item.ordering_key)
    )


@router.get(
    "/{endpoint_id}/secret",
    response_model=EndpointSecret,
    responses=problem_responses(*_AUTH, NotFound),
    summary="The endpoint's current signing secret",
)
async def get_endpoint_secret(
    scope: ManageScopeDep, endpoint_id: EndpointIdPath, session: SessionDep, resources: ResourcesDep
) -> EndpointSecret:
    async with session.begin():
        secret = await credentials.signing_secret(session, scope, endpoint_id, resources.keys)
    return EndpointSecret(secret=secret)


@router.post(
    "/{endpoint_id}/secret/rotate",
    response_model=RotatedSecret,
    responses=problem_responses(*_AUTH, NotFound),
    summary="Rotate the signing secret; the old one keeps signing during the overlap",
)
async def rotate_endpoint_secret(
    scope: ManageScopeDep,
    by: ActorDep,
    endpoint_id: EndpointIdPath,
    session: SessionDep,
    resources: ResourcesDep,
) -> RotatedSecret:
    overlap = resources.settings.secret_rotation_overlap_hours
    async with session.begin():
        rotated = await rotations.rotate_secret(
            session, scope, endpoint_id, overlap, resources.keys, by=by
        )
    return RotatedSecret(
        secret=rotated.secret,
        previous_secret_expires_at=rotated.endpoint.previous_secret_expires_at,
    )


@router.post(
    "/{endpoint_id}/signing-key/rotate",
    response_model=RotatedSigningKey,
    responses=problem_responses(*_AUTH, NotFound),
    summary="Rotate the ed25519 key pair (v1a); the old one keeps signing during the overlap",
)
async def rotate_endpoint_signing_key(
    scope: ManageScopeDep,
    by: ActorDep,
    endpoint_id: EndpointIdPath,
    session: SessionDep,
    resources: ResourcesDep,
) -> RotatedSigningKey:
    overlap = resources.settings.secret_rotation_overlap_hours
    async with session.begin():
        endpoint = await rotations.rotate_signing_key(
            session, scope, endpoint_id, overlap, resources.keys, by=by
        )
    assert endpoint.public_key is not None  # a rotation always leaves a pair
    return RotatedSigningKey(
        public_key=endpoint.public_key,
        previous_public_key_expires_at=endpoint.previous_signing_key_expires_at,
    )


@router.post(
    "/{endpoint_id}/test",
    response_model=EndpointTestReport,
    responses=problem_responses(*_AUTH, NotFound, TooManyRequests, ServiceUnavailable),
    summary="Send a signed test event now through the endpoint's whole path; report each step",
)
async def send_test_event(
    scope: ManageScopeDep, endpoint_id: EndpointIdPath, session: SessionDep, resources: ResourcesDep
) -> EndpointTestReport:
    async with session.begin():
        endpoint = await endpoints.get_endpoint(session, scope, endpoint_id)
        source = (await tenants.own(session, scope.tenant_id)).cloudevents_source
    # A customer's count against its own minute: it never uses up another's.
    await resources.tester.admit(resources.redis, scope.tenant_id, customer=scope.customer_id or "")
    # No transaction across the send.
    report = await resources.tester.test(endpoint, source, customer=scope.customer_id or "")
    return EndpointTestReport.model_validate(report)


@router.patch(
    "/{endpoint_id}",
    response_model=EndpointOut,
    responses=problem_responses(*_AUTH, NotFound, UnsupportedMediaType, DestinationRefused),
)
async def update_endpoint(
    scope: ManageScopeDep,
    visitor: VisitorDep,
    by: ActorDep,
    endpoint_id: EndpointIdPath,
    body: EndpointUpdate,
    session: SessionDep,
    resources: ResourcesDep,
) -> EndpointOut:
    customer_fields.check_customer_fields(scope, body)  # before any receiver is asked
    customer_fields.check_transforming(visitor, body)
    async with session.begin():
        target = await handshakes.for_update(session, scope, endpoint_id, body, resources.keys)
    consent = await resources.receiver_consent(scope, target)
    async with session.begin():
        endpoint = await endpoints.update_endpoint(
            session,
            scope,
            endpoint_id,
            body,
            resources.settings.destination_allowlist,
            resources.keys,
            consent,
            by=by,
        )
    if body.enabled:
        # Re-enabled: no leftover pause or probe may hold the destination back.
        await clear_flow_state(
            resources.redis,
            endpoint.id,
            tenant_id=scope.tenant_id,
            region=resources.settings.region,
        )
    elif body.ordering is not None or body.on_dead is not None:
        # Streams released or halted ones skipped: what became due is looked at now (and, if
        # this wake-up is lost, by the next reconcile run).
        await wake_destination(
            resources.redis,
            endpoint.id,
            tenant_id=scope.tenant_id,
            region=resources.settings.region,
        )
    return EndpointOut.model_validate(endpoint)


@router.delete(
    "/{endpoint_id}",
    status_code=204,
    responses=problem_responses(*_AUTH, NotFound),
    summary="Delete an endpoint; its delivery history is kept",
)
async def delete_endpoint(
    scope: ManageScopeDep, by: ActorDep, endpoint_id: EndpointIdPath, session: SessionDep
) -> Response:
    async with session.begin():
        await endpoints.delete_endpoint(session, scope, endpoint_id, by=by)
    return Response(status_code=204)
