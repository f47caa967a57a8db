"""What every console page needs: the signed-in viewer (or a redirect to sign in), the tenant
it looks at, the CSRF check on every form, and the templates."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote, urlsplit

import structlog
from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates

from app.console.service.sessions import Viewer, csrf_ok, viewer_of
from app.core.config import Settings
from app.core.errors import Forbidden
from app.runtime.resources import Resources, ResourcesDep

log = structlog.get_logger("herald.console")

COOKIE = "herald_console"
_DEFAULT_PORTS = {"http": 80, "https": 443}
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


Origin = tuple[str, str, int]  # scheme, host, port: what a browser means by an origin


def origin_of(url: str) -> Origin | None:
    """The web origin an Origin or Referer header names; None for anything else ("null", junk,
    another scheme). The port is spelled out, so http://h and http://h:80 are one origin."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # a port that is no number, or out of range
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname, port or _DEFAULT_PORTS[scheme]


def site_origin(request: Request, settings: Settings) -> Origin | None:
    """This site's origin as the browser sees it (None: a Host header that names none). Behind
    a TLS proxy uvicorn is not told to trust (HERALD_CONSOLE_SECURE_COOKIE=always) every request
    looks like plain HTTP here, yet the browser's pages are HTTPS: the setting says which."""
    scheme = "https" if settings.console_secure_cookie == "always" else request.url.scheme
    return origin_of(f"{scheme}://{request.url.netloc}")


def same_origin(request: Request, settings: Settings) -> bool:
    """A browser names the page a form came from; it must be this site -- scheme, host and port
    (a second lock beside the CSRF token, and the only one on the sign-in form, which has no
    session yet). The scheme matters: a page served over plain HTTP, which anyone on the path
    can write, must not post into the HTTPS console of the same host, nor the other way round."""
    sent = request.headers.get("origin") or request.headers.get("referer")
    if sent is None:
        return True  # not a browser, or one that says nothing: the token decides
    theirs, ours = origin_of(sent), site_origin(request, settings)
    if theirs is None or ours is None:
        return False
    if theirs == ("https", *ours[1:]) and ours[0] == "http":
        # Most likely a proxy ending TLS that this process was not told about: say what to set.
        log.warning(
            "console.form_refused",
            reason="the form came from this site's HTTPS page, but this process sees HTTP",
            hint="behind a TLS proxy set HERALD_CONSOLE_SECURE_COOKIE=always, "
            "or let uvicorn trust its X-Forwarded-Proto (FORWARDED_ALLOW_IPS)",
        )
    return theirs == ours


async def checked_form(
    request: Request, resources: ResourcesDep, viewer: ViewerDep
) -> dict[str, str]:
    """A state-changing form's fields, once its CSRF token and origin are checked."""
    form = await request.form()
    fields = {k: v for k, v in form.items() if isinstance(v, str)}
    if not same_origin(request, resources.settings) or not csrf_ok(
        viewer, fields.get("csrf_token")
    ):
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
