"""The console's audit trail: who changed what in the tenant's configuration, newest first."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from app.audit.service import audit
from app.console.routes.deps import ViewerDep, render
from app.core.ids import looks_like
from app.runtime.resources import ResourcesDep

router = APIRouter(prefix="/console", include_in_schema=False)

PAGE = 50


@router.get("/audit", response_class=HTMLResponse)
async def audit_trail(
    request: Request,
    resources: ResourcesDep,
    viewer: ViewerDep,
    subject: Annotated[str, Query(max_length=255)] = "",
    before: Annotated[str | None, Query()] = None,
) -> HTMLResponse:
    rows = []
    wanted = subject.strip()
    if wanted and not audit.SUBJECT_RULE.matches(wanted):
        return render(
            request,
            resources,
            "audit.html",
            viewer,
            status_code=422,
            nav="audit",
            rows=[],
            subject=subject,
            error=f"Changes to: {audit.SUBJECT_RULE.allowed}.",
            next_before=None,
        )
    if (tenant_id := viewer.viewing) is not None:
        served = await resources.reads.run(
            lambda session: audit.list_page(
                session,
                tenant_id,
                limit=PAGE + 1,
                before_id=before if before and looks_like("aud", before) else None,
                subject_id=wanted or None,
            )
        )
        rows = served.value
    more = len(rows) > PAGE
    return render(
        request,
        resources,
        "audit.html",
        viewer,
        nav="audit",
        rows=rows[:PAGE],
        subject=subject,
        next_before=rows[PAGE - 1].id if more else None,
    )
