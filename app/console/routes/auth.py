"""Signing in and out of the console, and an admin's choice of tenant."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.api.deps import ResourcesDep
from app.console.routes.deps import COOKIE, FormDep, ViewerDep, render, same_origin
from app.console.service import sessions
from app.errors import Forbidden

router = APIRouter(prefix="/console", include_in_schema=False)


def _back_to(target: str | None) -> str:
    """Where to go after signing in: a console page of this site, nothing else."""
    if target and target.startswith("/console") and not target.startswith("//"):
        return target
    return "/console"


@router.get("/sign-in", response_class=HTMLResponse)
async def sign_in_page(
    request: Request, resources: ResourcesDep, next: str | None = None
) -> HTMLResponse:
    return render(request, resources, "sign_in.html", None, next=_back_to(next))


@router.post("/sign-in", response_model=None)
async def sign_in(request: Request, resources: ResourcesDep) -> Response:
    if not same_origin(request):
        raise Forbidden("sign in from the console's own page")
    form = await request.form()
    key, back_to = form.get("key"), form.get("next")
    signed_in = None
    if isinstance(key, str):
        signed_in = await sessions.sign_in(
            resources.sessionmaker, resources.settings, resources.principals, key
        )
    target = _back_to(back_to if isinstance(back_to, str) else None)
    if signed_in is None:
        error = "That key is unknown or revoked. Paste a Herald API key (it starts hrk_)."
        return render(
            request, resources, "sign_in.html", None, status_code=401, next=target, error=error
        )
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE,
        signed_in.token,
        max_age=int(resources.settings.console_session_hours * 3600),
        path="/console",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
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
