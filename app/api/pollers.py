"""Who may poll a polling endpoint and acknowledge what it read (app/endpoints/routes/polls.py):
besides a tenant key, a key for that endpoint alone -- which every other route refuses -- and its
customer's portal session with ``poll_endpoints``."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials

from app.api.deps import BEARER, bearer_token, key_principal, tenant_of
from app.core.errors import NotFound
from app.core.scope import Scope
from app.runtime.resources import ResourcesDep
from app.tenants.service.customer_sessions import is_session_token, visitor_for


async def get_poller(
    resources: ResourcesDep,
    request: Request,
    # The path's id as sent: the key is judged before the id, as on every route.
    endpoint_id: Annotated[str, Path()],
    _declared: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
) -> Scope:
    """Who may poll an endpoint and acknowledge what it read: a tenant key (any of its
    tenant's), a key for that endpoint alone, or a portal session (its customer's) -- another
    endpoint's key finds the endpoint as no other caller would: not found."""
    token = bearer_token(request.headers.get("authorization"))
    if is_session_token(token):
        async with resources.sessionmaker() as session, session.begin():
            visitor = await visitor_for(session, token)
        # A read leases what it reads, hiding it from the receiver's own polls: a write.
        visitor.require("poll_endpoints")
        return visitor.scope
    principal = await key_principal(resources, token)
    if principal.endpoint_id not in (None, endpoint_id):
        raise NotFound(f"endpoint {endpoint_id} not found")
    return Scope(tenant_of(principal))


# Who polls an endpoint (its path's ``endpoint_id``): the scope it is looked for in.
PollerDep = Annotated[Scope, Depends(get_poller)]
