"""Signing in and out of the console, and an admin's choice of tenant."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.console.routes.deps import COOKIE, FormDep, ViewerDep, render, same_origin
from app.console.service import sessions, sign_in_forms
from app.runtime.resources import Resources, ResourcesDep

router = APIRouter(prefix="/console", include_in_schema=False)
SIGN_IN = "/console/sign-in"
FORM_COOKIE = "herald_console_form"  # the sign-in form's token, beside it in the page


def _back_to(target: str | None) -> str:
    """Where to go after signing in: a console page of this site, nothing else."""
    if target and target.startswith("/console") and not target.startswith("//"):
        return target
    return "/console"


@router.get("/sign-in", response_class=HTMLResponse)
async def sign_in_page(
    request: Request, resources: ResourcesDep, next: str | None = None
) -> HTMLResponse:
    return await _sign_in_form(request, resources, next=_back_to(next))


async def _sign_in_form(
    request: Request,
    resources: Resources,
    *,
    next: str,
    error: str | None = None,
    status: int = 200,
) -> HTMLResponse:
    """The sign-in form with its token, echoed in a cookie only this site can set: a form
    posted from elsewhere cannot carry both (login CSRF, where an attacker signs the victim in
    as the attacker), even from a browser that sends no Origin. The token is the server's own
    (app/console/service/sign_in_forms.py); one the browser already holds is kept while it is
    fresh, so a second sign-in tab does not make the first one's form stale."""
    token = await sign_in_forms.form_token(
        resources.sessionmaker, resources.keys, request.cookies.get(FORM_COOKIE)
    )
    page = render(
        request,
        resources,
        "sign_in.html",
        None,
        status_code=status,
        next=next,
        error=error,
        form_token=token.value,
    )
    _set_cookie(
        page, request, resources, FORM_COOKIE, token.value, max_age=token.seconds_left, path=SIGN_IN
    )
    return page


def _set_cookie(
    response: Response,
    request: Request,
    resources: Resources,
    name: str,
    value: str,
    *,
    max_age: int,
    path: str,
) -> None:
    https = request.url.scheme == "https"
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=path,
        httponly=True,
        samesite="strict",
        secure=https or resources.settings.console_secure_cookie == "always",
    )


@router.post("/sign-in", response_model=None)
async def sign_in(request: Request, resources: ResourcesDep) -> Response:
    form = await request.form()
    key, back_to, sent = form.get("key"), form.get("next"), form.get("form_token")
    target = _back_to(back_to if isinstance(back_to, str) else None)
    if not (
        same_origin(request, resources.settings)
        and await sign_in_forms.accepts(
            resources.sessionmaker,
            resources.keys,
            sent if isinstance(sent, str) else None,
            request.cookies.get(FORM_COOKIE),
        )
    ):
        error = "This sign-in form was stale or came from another site. Sign in here."
        return await _sign_in_form(request, resources, next=target, error=error, status=403)
    signed_in = None
    if isinstance(key, str):
        signed_in = await sessions.sign_in(
            resources.sessionmaker, resources.settings, resources.principals, key
        )
    if signed_in is None:
        error = "That key is unknown or revoked. Paste a Herald API key (it starts hrk_)."
        return await _sign_in_form(request, resources, next=target, error=error, status=401)
    previous = request.cookies.get(COOKIE)
    if previous:  # signing in again ends the session this browser had
        await sessions.sign_out(resources.sessionmaker, previous)
    response = RedirectResponse(target, status_code=303)
    hours = resources.settings.console_session_hours
    _set_cookie(
        response,
        request,
        resources,
        COOKIE,
        signed_in.token,
        max_age=int(hours * 3600),
        path="/console",
    )
    response.delete_cookie(FORM_COOKIE, path=SIGN_IN)
    return response


@router.post("/sign-out")
async def sign_out(request: Request, resources: ResourcesDep, _form: FormDep) -> RedirectResponse:
    token = request.cookies.get(COOKIE)
    if token:
        await sessions.sign_out(resources.sessionmaker, token)
    response = RedirectResponse("/console/sign-in", status_code=303)
    response.delete_cookie(COOKIE, path="/console")
    return response


@router.post("/tenant")
async def pick_tenant(
    resources: ResourcesDep, viewer: ViewerDep, form: FormDep
) -> RedirectResponse:
    await sessions.view_tenant(resources.sessionmaker, viewer, form.get("tenant_id") or None)
    return RedirectResponse(_back_to(form.get("next")), status_code=303)
