"""The console's routes, its templates and static files, installed on the API app."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from app.api.formatting import FILTERS
from app.api.problems import herald_problem
from app.console.routes import (
    actions,
    audit,
    auth,
    customers,
    endpoint_forms,
    endpoints,
    event_types,
    keys,
    pages,
    portal_settings,
)
from app.console.routes.deps import SignInNeeded, render, sign_in_redirect
from app.core.errors import HeraldError

_HERE = Path(__file__).resolve().parents[1]


def install(app: FastAPI) -> None:
    """Pages at /console, assets at /console/static; Herald's errors on a console page come
    back as a page (the API's problem+json everywhere else)."""
    templates = Jinja2Templates(directory=_HERE / "templates")
    templates.env.filters.update(FILTERS)
    app.state.console_templates = templates
    pages_and_forms = (
        auth,
        pages,
        actions,
        endpoint_forms,
        endpoints,
        event_types,
        customers,
        keys,
        portal_settings,
        audit,
    )
    for module in pages_and_forms:
        app.include_router(module.router)
    app.mount("/console/static", StaticFiles(directory=_HERE / "static"), name="console-static")

    # Where a browser looks for an icon by itself, on a page that names none (/docs, a JSON
    # answer opened in a tab): the console's, rather than a 404 in every such page's log.
    async def favicon() -> FileResponse:
        return FileResponse(_HERE / "static" / "favicon.ico")

    app.add_api_route("/favicon.ico", favicon, methods=["GET"], include_in_schema=False)
    app.add_exception_handler(SignInNeeded, sign_in_redirect)

    async def herald_error(request: Request, exc: Exception) -> Response:
        if not request.url.path.startswith("/console") or not isinstance(exc, HeraldError):
            return await herald_problem(request, exc)
        resources = request.app.state.resources
        return render(
            request,
            resources,
            "error.html",
            None,
            status_code=exc.status,
            title=exc.title,
            detail=exc.detail or exc.title,
        )

    app.add_exception_handler(HeraldError, herald_error)
