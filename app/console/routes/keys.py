"""The console's keys: a tenant's API keys listed, a new one made (shown once, on the answer to
its form, never in a URL), one revoked. The same rules as /v1/api-keys, and the same audit."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import ValidationError

from app.console.routes.deps import FormDep, ViewerDep, render
from app.console.service.sessions import Viewer
from app.core.ids import looks_like
from app.runtime.resources import Resources, ResourcesDep
from app.tenants.schemas import ApiKeyCreate
from app.tenants.service import api_keys

router = APIRouter(prefix="/console/keys", include_in_schema=False)
PAGE = 50


async def _page(
    request: Request,
    resources: Resources,
    viewer: Viewer,
    *,
    before: str | None = None,
    error: str | None = None,
    label: str = "",
) -> HTMLResponse:
    rows = []
    if viewer.viewing is not None:
        async with resources.sessionmaker() as session, session.begin():
            rows = await api_keys.tenant_keys(
                session,
                viewer.viewing,
                limit=PAGE + 1,
                before_id=before if before and looks_like("key", before) else None,
            )
    more = len(rows) > PAGE
    return render(
        request,
        resources,
        "keys.html",
        viewer,
        status_code=422 if error else 200,
        nav="keys",
        rows=rows[:PAGE],
        next_before=rows[PAGE - 1].id if more else None,
        error=error,
        label=label,
    )


@router.get("", response_class=HTMLResponse)
async def keys_page(
    request: Request,
    resources: ResourcesDep,
    viewer: ViewerDep,
    before: Annotated[str | None, Query()] = None,
) -> HTMLResponse:
    return await _page(request, resources, viewer, before=before)


@router.post("", response_class=HTMLResponse)
async def create_key(
    request: Request, resources: ResourcesDep, viewer: ViewerDep, form: FormDep
) -> HTMLResponse:
    tenant_id = viewer.chosen_tenant()
    label = form.get("label", "").strip()
    try:
        spec = ApiKeyCreate.model_validate({"label": label or None})
    except ValidationError as exc:
        said = f"The label {exc.errors()[0]['msg']}."
        return await _page(request, resources, viewer, error=said, label=label)
    async with resources.sessionmaker() as session, session.begin():
        issued = await api_keys.issue_key(
            session, tenant_id=tenant_id, is_admin=False, label=spec.label, by=viewer.actor
        )
    return render(
        request, resources, "key_created.html", viewer, nav="keys", key=issued.key, row=issued.row
    )


@router.post("/{key_id}/revoke")
async def revoke_key(
    resources: ResourcesDep, viewer: ViewerDep, _form: FormDep, key_id: str
) -> RedirectResponse:
    own = api_keys.Principal(tenant_id=viewer.chosen_tenant(), is_admin=False)
    async with resources.sessionmaker() as session, session.begin():
        await api_keys.revoke_key(session, own, key_id, resources.principals, by=viewer.actor)
    return RedirectResponse("/console/keys", status_code=303)
