"""What the console changes: redrive one dead delivery or every matching one, try one that
waits for a retry now, cancel one. Each is a form with the session's CSRF token, answered with
a redirect to the page that shows the result (post/redirect/get)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from app.console.routes.deps import FormDep, ViewerDep, render
from app.console.routes.filters import dead_filter
from app.core.scope import Scope
from app.delivery.service import cancel, listings, redrive, retry_now, skip
from app.runtime.resources import ResourcesDep

router = APIRouter(prefix="/console", include_in_schema=False)


@router.post("/deliveries/{delivery_id}/redrive")
async def redrive_one(
    resources: ResourcesDep, viewer: ViewerDep, _form: FormDep, delivery_id: str
) -> RedirectResponse:
    async with resources.sessionmaker() as session, session.begin():
        _, publications = await redrive.redrive_one(
            session, Scope(viewer.chosen_tenant()), delivery_id, region=resources.settings.region
        )
    resources.publisher.submit(publications)
    return RedirectResponse(f"/console/deliveries/{delivery_id}", status_code=303)


@router.post("/deliveries/{delivery_id}/retry")
async def retry_one_now(
    resources: ResourcesDep, viewer: ViewerDep, _form: FormDep, delivery_id: str
) -> RedirectResponse:
    async with resources.sessionmaker() as session, session.begin():
        _, publications = await retry_now.retry_now(
            session, Scope(viewer.chosen_tenant()), delivery_id, region=resources.settings.region
        )
    resources.publisher.submit(publications)
    return RedirectResponse(f"/console/deliveries/{delivery_id}", status_code=303)


@router.post("/deliveries/{delivery_id}/cancel")
async def cancel_one(
    resources: ResourcesDep, viewer: ViewerDep, _form: FormDep, delivery_id: str
) -> RedirectResponse:
    async with resources.sessionmaker() as session, session.begin():
        cancelled = await cancel.cancel_delivery(
            session, viewer.chosen_tenant(), delivery_id, region=resources.settings.region
        )
    resources.publisher.submit(cancelled.publications)
    return RedirectResponse(f"/console/deliveries/{delivery_id}", status_code=303)


@router.post("/deliveries/{delivery_id}/skip")
async def skip_one(
    resources: ResourcesDep, viewer: ViewerDep, _form: FormDep, delivery_id: str
) -> RedirectResponse:
    async with resources.sessionmaker() as session, session.begin():
        skipped = await skip.skip_halted_head(
            session, viewer.chosen_tenant(), delivery_id, region=resources.settings.region
        )
    resources.publisher.submit(skipped.publications)
    return RedirectResponse(f"/console/deliveries/{delivery_id}", status_code=303)


@router.post("/dead/redrive")
async def redrive_matching(
    resources: ResourcesDep, viewer: ViewerDep, form: FormDep
) -> RedirectResponse:
    """Every dead delivery the dead-letter page's filter matches, as a bulk redrive job."""
    wanted = dead_filter(form)
    job = await redrive.start_bulk_redrive(
        resources.sessionmaker,
        resources.queue,
        resources.settings,
        tenant_id=viewer.chosen_tenant(),
        wanted=wanted.model_dump(mode="json"),
    )
    return RedirectResponse(f"/console/redrives/{job.id}", status_code=303)


@router.get("/redrives/{job_id}", response_class=HTMLResponse)
async def redrive_progress(
    request: Request, resources: ResourcesDep, viewer: ViewerDep, job_id: str
) -> HTMLResponse:
    async with resources.sessionmaker() as session, session.begin():
        job = await listings.redrive_job(session, viewer.chosen_tenant(), job_id)
    return render(request, resources, "redrive.html", viewer, job=job)
