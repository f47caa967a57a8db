"""The portal's page: one server-rendered shell per session, framed by the tenant's site. Its
script (static, same origin) opens the session and fetches each view as a fragment."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.templating import Jinja2Templates

from app.core.errors import NotFound
from app.portal.service import sessions, settings
from app.portal.service.settings import Look
from app.runtime.resources import ResourcesDep

router = APIRouter(prefix="/portal", include_in_schema=False)


def _policy(look: Look | None) -> str:
    """Framed only by the tenant's registered origins; images from them (its logo) and here;
    scripts, styles and requests to this origin alone."""
    origins = look.allowed_origins if look else ()
    ancestors = " ".join(origins) or "'none'"
    images = " ".join(("'self'", *origins))
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        f"img-src {images}; frame-ancestors {ancestors}; form-action 'self'; "
        "base-uri 'none'; object-src 'none'"
    )


def _headers(look: Look | None) -> dict[str, str]:
    return {
        "Cache-Control": "no-store",
        "Content-Security-Policy": _policy(look),
        "X-Content-Type-Options": "nosniff",
        # The page's URL holds its session id (not secret) and, until the script clears it,
        # the link's token in the fragment -- which no Referer ever carries; none is sent.
        "Referrer-Policy": "no-referrer",
    }


async def _look(resources: ResourcesDep, session_id: str) -> Look | None:
    async with resources.sessionmaker() as session, session.begin():
        tenant_id = await sessions.tenant_of(session, session_id)
        if tenant_id is None:
            return None
        return await settings.look_of(session, tenant_id, session_id)


@router.get("/s/{session_id}", response_class=HTMLResponse)
async def portal_page(request: Request, resources: ResourcesDep, session_id: str) -> HTMLResponse:
    look = await _look(resources, session_id)
    templates: Jinja2Templates = request.app.state.portal_templates
    return templates.TemplateResponse(
        request,
        "portal.html" if look else "unknown.html",
        {"look": look, "session_id": session_id},
        status_code=200 if look else 404,
        headers=_headers(look),
    )


@router.get("/s/{session_id}/theme.css")
async def portal_theme(resources: ResourcesDep, session_id: str) -> Response:
    """The tenant's accent as a stylesheet: the page's CSP admits no inline style."""
    look = await _look(resources, session_id)
    accent = look.accent_color if look else settings.DEFAULT_ACCENT
    return Response(
        f":root {{ --accent: {accent}; }}\n",
        media_type="text/css",
        headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"},
    )


@router.get("/s/{session_id}/logo")
async def portal_logo(resources: ResourcesDep, session_id: str) -> Response:
    """The tenant's uploaded logo, its type told by its bytes when it was saved."""
    async with resources.sessionmaker() as session, session.begin():
        tenant_id = await sessions.tenant_of(session, session_id)
        logo = None if tenant_id is None else await settings.logo_of(session, tenant_id)
    if logo is None:
        raise NotFound("this portal has no uploaded logo")
    data, media_type = logo
    return Response(
        data,
        media_type=media_type,
        headers={
            "Cache-Control": "private, max-age=300",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'",
        },
    )
