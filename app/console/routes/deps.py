"""What every console page needs: the signed-in viewer (or a redirect to sign in), the tenant
it looks at, the CSRF check on every form, and the templates."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote, urlsplit

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates

from app.api.deps import Resources, ResourcesDep
from app.console.service.sessions import Viewer, csrf_ok, viewer_of
from app.errors import Forbidden

COOKIE = "herald_console"
# Every page: never cached (they show live state, and a rotated secret once), never framed
# (no clickjacking of its buttons), nothing loaded or posted anywhere but here.
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; "
    "form-action 'self'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


class SignInNeeded(Exception):
    """No live session: the page answers with a redirect to the sign-in page."""

    def __init__(self, back_to: str) -> None:
        self.back_to = back_to


async def sign_in_redirect(request: Request, exc: Exception) -> RedirectResponse:
    assert isinstance(exc, SignInNeeded)
    return RedirectResponse(f"/console/sign-in?next={quote(exc.back_to)}", status_code=303)


async def get_viewer(request: Request, resources: ResourcesDep) -> Viewer:
    viewer = await viewer_of(
        resources.sessionmaker, resources.settings, request.cookies.get(COOKIE)
    )
    if viewer is None:
        raise SignInNeeded(request.url.path)
    return viewer


ViewerDep = Annotated[Viewer, Depends(get_viewer)]


def same_origin(request: Request) -> bool:
    """A browser names the page a form came from; it must be this site (a second lock beside
    the CSRF token, and the only one on the sign-in form, which has no session yet)."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if origin is None:
        return True  # not a browser, or one that says nothing: the token decides
    return urlsplit(origin).netloc == request.url.netloc


async def checked_form(request: Request, viewer: ViewerDep) -> dict[str, str]:
    """A state-changing form's fields, once its CSRF token and origin are checked."""
    form = await request.form()
    fields = {k: v for k, v in form.items() if isinstance(v, str)}
    if not same_origin(request) or not csrf_ok(viewer, fields.get("csrf_token")):
        raise Forbidden("this form is stale or was not sent from the console: reload the page")
    return fields


FormDep = Annotated[dict[str, str], Depends(checked_form)]


def render(
    request: Request,
    resources: Resources,
    template: str,
    viewer: Viewer | None,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    templates: Jinja2Templates = request.app.state.console_templates
    return templates.TemplateResponse(
        request,
        template,
        {"viewer": viewer, "region": resources.settings.region, **context},
        status_code=status_code,
        headers=PAGE_HEADERS,
    )
