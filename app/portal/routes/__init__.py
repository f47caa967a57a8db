"""The portal's routes, its templates and static files, installed on the API app."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from app.api.formatting import FILTERS
from app.portal.routes import exchange, forms, fragments, pages, sessions, test_events
from app.portal.routes.snippets import SNIPPETS
from app.portal.routes.words import WORDS

_HERE = Path(__file__).resolve().parents[1]


def install(app: FastAPI) -> None:
    """The tenant's /v1 routes, the page at /portal/s/{id}, its fragments and forms under
    /portal/api, its assets at /portal/static."""
    templates = Jinja2Templates(directory=_HERE / "templates")
    templates.env.filters.update({**FILTERS, **WORDS})
    templates.env.globals["snippets"] = SNIPPETS
    app.state.portal_templates = templates
    for module in (sessions, exchange, pages, fragments, forms, test_events):
        app.include_router(module.router)
    app.mount("/portal/static", StaticFiles(directory=_HERE / "static"), name="portal-static")
