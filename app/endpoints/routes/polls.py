"""A polling endpoint's receiver reads its deliveries and acknowledges what it processed
(app/engine/service/polls.py). Its credential: a key for that endpoint alone, a tenant key, or
its customer's portal session."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from app.api.deps import SessionDep
from app.api.paths import EndpointIdPath
from app.api.pollers import PollerDep
from app.api.problems import problem_responses
from app.core.errors import (
    Conflict,
    Forbidden,
    NotFound,
    TooManyRequests,
    Unauthorized,
    Unprocessable,
    UnsupportedMediaType,
)
from app.core.scope import Scope
from app.endpoints.schemas import PollAck, PollAckOut, PolledDeliveryOut, PollPage
from app.endpoints.service.endpoints import get_endpoint
from app.engine.service import polls
from app.runtime.resources import ResourcesDep

router = APIRouter(prefix="/v1/endpoints", tags=["polling"])


async def _polled_endpoint(
    session: SessionDep, scope: Scope, endpoint_id: str, *, reading: bool
) -> None:
    """The scope's polling endpoint; to be read, an enabled one (what was read before it was
    disabled may still be acknowledged)."""
    async with session.begin():
        endpoint = await get_endpoint(session, scope, endpoint_id)
    if endpoint.delivery != "poll":
        raise Conflict(
            f"endpoint {endpoint_id} is sent its deliveries: only a polling endpoint "
            '("delivery": "poll") is polled'
        )
    if reading and not endpoint.enabled:
        raise Conflict(
            f"endpoint {endpoint_id} is disabled: its deliveries wait until it is enabled again"
        )


@router.get(
    "/{endpoint_id}/poll",
    response_model=PollPage,
    responses=problem_responses(Unauthorized, Forbidden, NotFound, Conflict, TooManyRequests),
    summary="Read a polling endpoint's due deliveries, each hidden from other polls until "
    "acknowledged or until its visibility ends",
    description="Each delivery comes as a push would have sent it -- its body and signed "
    "headers -- with a receipt to acknowledge it by. One not acknowledged within `visibility` "
    "seconds is read again by a later poll, under the same id; so two pollers never hold one "
    "delivery at once. With `wait`, a poll that finds nothing waits up to that long for "
    "deliveries (a long poll); past the tenant's share of waiting polls it is answered 429.",
)
async def poll(
    request: Request,
    scope: PollerDep,
    endpoint_id: EndpointIdPath,
    session: SessionDep,
    resources: ResourcesDep,
    response: Response,
    limit: Annotated[
        int, Query(ge=1, le=polls.PAGE_MAX, description="Deliveries to read, at most.")
    ] = 100,
    wait: Annotated[
        float,
        Query(ge=0, le=polls.WAIT_MAX_SECONDS, description="Seconds to wait when none is due."),
    ] = 0,
    visibility: Annotated[
        float,
        Query(
            ge=polls.VISIBILITY_MIN_SECONDS,
            le=polls.VISIBILITY_MAX_SECONDS,
            description="Seconds each delivery read stays hidden from other polls, unless "
            "acknowledged first.",
        ),
    ] = 30,
) -> PollPage:
    await _polled_endpoint(session, scope, endpoint_id, reading=True)
    try:
        read = await resources.polls.poll(
            scope,
            endpoint_id,
            limit=limit,
            wait=wait,
            visibility=visibility,
            gone=request.is_disconnected,
        )
    except polls.PollRefused:
        raise TooManyRequests(
            "your tenant (or customer) has as many polls waiting in this process as it may: "
            "poll again in a second, or with a shorter wait",
            headers={"Retry-After": "1"},
        ) from None
    response.headers["Cache-Control"] = "no-store"
    return PollPage(data=[PolledDeliveryOut.model_validate(r, from_attributes=True) for r in read])


@router.post(
    "/{endpoint_id}/poll/ack",
    response_model=PollAckOut,
    responses=problem_responses(
        Unauthorized, Forbidden, NotFound, Conflict, Unprocessable, UnsupportedMediaType
    ),
    summary="Acknowledge deliveries a poll read: each succeeds, its read its attempt",
    description="A receipt acknowledges only while its read's visibility lasts; one that "
    "expired is reported so (its delivery is read again, under the same id). Acknowledging "
    "twice is harmless. An ordered stream's next delivery is readable once its head is "
    "acknowledged.",
)
async def acknowledge(
    scope: PollerDep,
    endpoint_id: EndpointIdPath,
    ack: PollAck,
    session: SessionDep,
    resources: ResourcesDep,
) -> PollAckOut:
    await _polled_endpoint(session, scope, endpoint_id, reading=False)
    done = await resources.polls.acknowledge(endpoint_id, ack.receipts)
    return PollAckOut(acknowledged=done.acknowledged, expired=done.expired)
