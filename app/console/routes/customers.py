"""The console's customers: a tenant's customers with their portal sessions -- each session's
state, capabilities and key -- and the way to end one session or all of a customer's. The
portal's own service does it, as /v1/portal-sessions does."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from app.console.routes.deps import FormDep, ViewerDep, render
from app.core.fields import CUSTOMER_ID_RULE
from app.portal.service import sessions
from app.runtime.resources import ResourcesDep
from app.tenants.service import customers

router = APIRouter(prefix="/console/customers", include_in_schema=False)
PAGE = 50
SESSIONS_SHOWN = 10  # a customer's newest; the API lists them all


@router.get("", response_class=HTMLResponse)
async def customers_page(
    request: Request,
    resources: ResourcesDep,
    viewer: ViewerDep,
    after: Annotated[str | None, Query()] = None,
) -> HTMLResponse:
    rows = []
    if (tenant_id := viewer.viewing) is not None:
        start = after if after and CUSTOMER_ID_RULE.matches(after) else None
        async with resources.sessionmaker() as session, session.begin():
            page = await customers.list_customers(
                session, tenant_id, limit=PAGE + 1, after_id=start
            )
            for customer in page[:PAGE]:
                listed = await sessions.list_sessions(
                    session,
                    tenant_id,
                    customer_id=customer.id,
                    api_key_id=None,
                    limit=SESSIONS_SHOWN,
                    before_id=None,
                )
                rows.append((customer, listed))
        more = len(page) > PAGE
    else:
        more = False
    now = datetime.now(UTC)
    return render(
        request,
        resources,
        "customers.html",
        viewer,
        nav="customers",
        rows=rows,
        status_of=lambda listed: sessions.status_of(listed, now),
        next_after=rows[-1][0].id if more else None,
    )


@router.post("/{customer_id}/sessions/{session_id}/revoke")
async def revoke_session(
    resources: ResourcesDep, viewer: ViewerDep, _form: FormDep, customer_id: str, session_id: str
) -> RedirectResponse:
    async with resources.sessionmaker() as session, session.begin():
        await sessions.revoke(session, viewer.chosen_tenant(), session_id)
    return RedirectResponse(f"/console/customers#customer-{customer_id}", status_code=303)


@router.post("/{customer_id}/sessions/revoke")
async def revoke_all_sessions(
    resources: ResourcesDep, viewer: ViewerDep, _form: FormDep, customer_id: str
) -> RedirectResponse:
    tenant_id = viewer.chosen_tenant()
    async with resources.sessionmaker() as session, session.begin():
        await customers.get_customer(session, tenant_id, customer_id)  # 404: not the tenant's
        await sessions.revoke_matching(session, tenant_id, customer_id=customer_id, api_key_id=None)
    return RedirectResponse(f"/console/customers#customer-{customer_id}", status_code=303)
