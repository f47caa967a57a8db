"""What every portal request needs: the visitor its bearer token names, and the templates.

No cookie carries the session (an iframe on another site may not be allowed one): the page's
script holds the token in memory and sends it as ``Authorization: Bearer``. With no ambient
credential there is nothing for another site to ride on, so the portal's forms need no CSRF
token -- a form posted from elsewhere arrives without the header and is refused."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from app.core.errors import Unauthorized
from app.portal.service.sessions import Visitor, visitor_for
from app.runtime.resources import ResourcesDep

# A fragment is read by the portal's own script, never shown as a page of its own: not
# cached (a secret may be in it), not framed, loading nothing.
FRAGMENT_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


async def get_visitor(request: Request, resources: ResourcesDep) -> Visitor:
    scheme, _, token = (request.headers.get("authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("this portal request carries no session: open the portal again")
    async with resources.sessionmaker() as session, session.begin():
        return await visitor_for(session, token.strip())


VisitorDep = Annotated[Visitor, Depends(get_visitor)]


def fragment(
    request: Request, template: str, visitor: Visitor, status_code: int = 200, **context: Any
) -> HTMLResponse:
    templates: Jinja2Templates = request.app.state.portal_templates
    return templates.TemplateResponse(
        request,
        template,
        {"visitor": visitor, **context},
        status_code=status_code,
        headers=FRAGMENT_HEADERS,
    )
