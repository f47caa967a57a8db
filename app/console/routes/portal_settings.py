"""The console's form for the portal's settings -- its name, accent colour, logo by URL and the
origins that may frame it -- held to PATCH /v1/portal-settings' own model and rules, refused in
its words, and recorded in the audit trail under the console's sign-in."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from app.console.routes.deps import FormDep, ViewerDep, render
from app.console.service.form_reading import Unreadable, validated
from app.console.service.sessions import Viewer
from app.core.errors import Unprocessable
from app.portal.schemas import PortalSettingsOut, PortalSettingsPatch
from app.portal.service import settings
from app.runtime.resources import Resources, ResourcesDep

router = APIRouter(prefix="/console/portal-settings", include_in_schema=False)


async def _form(
    request: Request,
    resources: Resources,
    viewer: Viewer,
    *,
    error: str | None = None,
    typed: dict[str, str] | None = None,
) -> HTMLResponse:
    current: PortalSettingsOut | None = None
    if viewer.viewing is not None:
        async with resources.sessionmaker() as session, session.begin():
            current = settings.shown(await settings.get_settings(session, viewer.viewing))
    shown = typed or (
        {
            "name": current.name or "",
            "accent_color": current.accent_color or "",
            "logo_url": current.logo_url or "",
            "allowed_origins": "\n".join(current.allowed_origins),
        }
        if current is not None
        else {}
    )
    return render(
        request,
        resources,
        "portal_settings.html",
        viewer,
        status_code=422 if error else 200,
        nav="portal-settings",
        current=current,
        shown=shown,
        error=error,
    )


@router.get("", response_class=HTMLResponse)
async def portal_settings_page(
    request: Request, resources: ResourcesDep, viewer: ViewerDep
) -> HTMLResponse:
    return await _form(request, resources, viewer)


@router.post("", response_class=HTMLResponse, response_model=None)
async def change_portal_settings(
    request: Request, resources: ResourcesDep, viewer: ViewerDep, form: FormDep
) -> HTMLResponse | RedirectResponse:
    tenant_id = viewer.chosen_tenant()
    origins = [line.strip() for line in form.get("allowed_origins", "").splitlines()]
    fields = {
        "name": form.get("name", "").strip() or None,
        "accent_color": form.get("accent_color", "").strip() or None,
        "logo_url": form.get("logo_url", "").strip() or None,
        "allowed_origins": [origin for origin in origins if origin],
    }
    try:
        change = validated(PortalSettingsPatch, fields)
        async with resources.sessionmaker() as session, session.begin():
            await settings.patch_settings(session, tenant_id, change, by=viewer.actor)
    except Unreadable as refused:
        return await _form(request, resources, viewer, error=str(refused), typed=form)
    except Unprocessable as exc:
        return await _form(request, resources, viewer, error=exc.detail, typed=form)
    return RedirectResponse("/console/portal-settings", status_code=303)
