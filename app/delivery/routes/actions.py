"""What a producer does to deliveries it sent: cancel one, or send dead ones again -- one by id,
or every one matching a filter in the background (a tracked job whose progress can be read
back)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.deps import ReplayScopeDep, SessionDep, SettingsDep, TenantDep
from app.api.paths import DeliveryIdPath, RedriveJobIdPath
from app.api.problems import problem_responses
from app.core.errors import (
    Conflict,
    Forbidden,
    NotFound,
    ServiceUnavailable,
    Unauthorized,
    UnsupportedMediaType,
)
from app.delivery.schemas import DeliveryOut, RedriveFilter, RedriveJobOut
from app.delivery.service import cancel, listings, redrive, retry_now, skip
from app.runtime.resources import PublisherDep, ResourcesDep

# Beside the deliveries router under the same prefix, and included before it: its
# /redrive/{job_id} must match before /{delivery_id}/... does.
router = APIRouter(prefix="/v1/deliveries", tags=["deliveries"])
_AUTH = (Unauthorized, Forbidden)


@router.post(
    "/redrive",
    status_code=202,
    response_model=RedriveJobOut,
    responses=problem_responses(*_AUTH, UnsupportedMediaType, ServiceUnavailable),
    summary="Send matching dead deliveries again (or succeeded ones: a replay), in the background",
)
async def start_bulk_redrive(
    wanted: RedriveFilter, tenant_id: TenantDep, resources: ResourcesDep, response: Response
) -> RedriveJobOut:
    job = await redrive.start_bulk_redrive(
        resources.sessionmaker,
        resources.queue,
        resources.settings,
        tenant_id=tenant_id,
        wanted=wanted.model_dump(mode="json"),
    )
    response.headers["Location"] = f"/v1/deliveries/redrive/{job.id}"
    return RedriveJobOut.model_validate(job)


@router.get(
    "/redrive/{job_id}",
    response_model=RedriveJobOut,
    responses=problem_responses(*_AUTH, NotFound),
    summary="A bulk redrive's progress",
)
async def get_bulk_redrive(
    tenant_id: TenantDep, job_id: RedriveJobIdPath, session: SessionDep
) -> RedriveJobOut:
    async with session.begin():
        job = await listings.redrive_job(session, tenant_id, job_id)
    return RedriveJobOut.model_validate(job)


@router.post(
    "/{delivery_id}/redrive",
    status_code=202,
    response_model=DeliveryOut,
    responses=problem_responses(*_AUTH, NotFound, Conflict),
    summary="Send a dead delivery again (same id, attempt history kept)",
)
async def redrive_delivery(
    scope: ReplayScopeDep,
    delivery_id: DeliveryIdPath,
    session: SessionDep,
    settings: SettingsDep,
    publisher: PublisherDep,
) -> DeliveryOut:
    async with session.begin():
        delivery, publications = await redrive.redrive_one(
            session, scope, delivery_id, region=settings.region
        )
    publisher.submit(publications)
    return DeliveryOut.model_validate(delivery)


@router.post(
    "/{delivery_id}/retry",
    response_model=DeliveryOut,
    responses=problem_responses(*_AUTH, NotFound, Conflict),
    summary="Try a delivery that waits for its next attempt now, not when its backoff says",
    description="For a delivery that failed and waits for a retry (`pending` or `enqueued`, "
    "attempted before, `next_attempt_at` ahead): it becomes due now. Its endpoint's ceilings, "
    "pause and circuit breaker still decide when it is sent. Anything else is a 409 that "
    "says why (a dead delivery is redriven instead).",
)
async def retry_delivery_now(
    scope: ReplayScopeDep,
    delivery_id: DeliveryIdPath,
    session: SessionDep,
    settings: SettingsDep,
    publisher: PublisherDep,
) -> DeliveryOut:
    async with session.begin():
        delivery, publications = await retry_now.retry_now(
            session, scope, delivery_id, region=settings.region
        )
    publisher.submit(publications)
    return DeliveryOut.model_validate(delivery)


@router.post(
    "/{delivery_id}/cancel",
    response_model=DeliveryOut,
    responses=problem_responses(*_AUTH, NotFound, Conflict),
    summary="Stop a delivery that has not succeeded or died: it is never sent again",
    description="The delivery becomes `cancelled`, a final state. An attempt in flight at that "
    "moment (`lease_until` in the future) finishes and is recorded in the attempt log; no "
    "attempt follows it. Cancelling a cancelled delivery answers it again; one that succeeded "
    "or died is a 409.",
)
async def cancel_delivery(
    tenant_id: TenantDep,
    delivery_id: DeliveryIdPath,
    session: SessionDep,
    settings: SettingsDep,
    publisher: PublisherDep,
) -> DeliveryOut:
    async with session.begin():
        cancelled = await cancel.cancel_delivery(
            session, tenant_id, delivery_id, region=settings.region
        )
    publisher.submit(cancelled.publications)
    return DeliveryOut.model_validate(cancelled.delivery)


@router.post(
    "/{delivery_id}/skip",
    response_model=DeliveryOut,
    responses=problem_responses(*_AUTH, NotFound, Conflict),
    summary="Move a halted stream past its dead head",
    description="For an ordered endpoint with `on_dead: halt`: the dead delivery that halts its "
    "stream stays dead (its status says skipped) and the stream's next delivery starts. "
    "Redriving the head instead retries it in place. Any other delivery is a 409.",
)
async def skip_delivery(
    tenant_id: TenantDep,
    delivery_id: DeliveryIdPath,
    session: SessionDep,
    settings: SettingsDep,
    publisher: PublisherDep,
) -> DeliveryOut:
    async with session.begin():
        skipped = await skip.skip_halted_head(
            session, tenant_id, delivery_id, region=settings.region
        )
    publisher.submit(skipped.publications)
    return DeliveryOut.model_validate(skipped.delivery)
