"""Request dependencies: the app's resources (app/runtime/), the caller's identity, common
headers."""

from __future__ import annotations

import hmac
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Header, Request, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncSession

from app.core import tracing
from app.core.actors import Actor
from app.core.config import Settings
from app.core.errors import BadRequest, Forbidden, Unauthorized, UnsupportedMediaType
from app.core.fields import IDEMPOTENCY_KEY_RULE, is_idempotency_key
from app.core.replicas import Reads
from app.core.scope import Scope
from app.runtime.resources import Resources, ResourcesDep
from app.tenants.service.api_keys import Principal, principal_for
from app.tenants.service.customer_sessions import (
    Visitor,
    is_session_token,
    tenant_visitor,
    visitor_for,
)


# Every dependency here is ``async def`` although none awaits: FastAPI runs a plain ``def``
# dependency in a worker thread, and those hops were a measurable share of each request.
async def get_settings(resources: ResourcesDep) -> Settings:
    return resources.settings


async def get_session(resources: ResourcesDep) -> AsyncIterator[AsyncSession]:
    async with resources.sessionmaker() as session:
        yield session


SettingsDep = Annotated[Settings, Depends(get_settings)]
SessionDep = Annotated[AsyncSession, Depends(get_session)]

T = TypeVar("T")

# On an answer read from a replica: how many seconds behind the primary it may be. Absent: the
# primary answered.
READ_LAG_HEADER = "Herald-Read-Lag"
# The header, as a read-only route's OpenAPI ``responses`` declare it (merged with its 200).
READ_LAG_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "headers": {
            READ_LAG_HEADER: {
                "description": "Present when a read replica answered: how many seconds behind "
                "the primary the answer may be, at most. Absent: the primary answered.",
                "schema": {"type": "string", "example": "0.412"},
            }
        }
    }
}


@dataclass(frozen=True)
class Reader:
    """A read-only route's way to its rows: ``await read(lambda session: ...)`` runs the read
    in a transaction of its own, on a replica that keeps up or on the primary (Reads), and
    says on the answer how old it may be."""

    reads: Reads
    response: Response

    async def __call__(self, read: Callable[[AsyncSession], Awaitable[T]]) -> T:
        served = await self.reads.run(read)
        if served.lag is not None:
            self.response.headers[READ_LAG_HEADER] = f"{served.lag:.3f}"
        return served.value


async def get_reader(resources: ResourcesDep, response: Response) -> Reader:
    return Reader(resources.reads, response)


ReaderDep = Annotated[Reader, Depends(get_reader)]


# The scheme every /v1 route declares in OpenAPI, so that /docs "Authorize" and generated
# clients send the key. Declared only: ``authenticate`` reads the header itself, so that a
# missing or malformed one gets Herald's own 401 problem rather than FastAPI's.
BEARER = HTTPBearer(
    scheme_name="apiKey",
    description="An API key, sent as `Authorization: Bearer <key>`. A tenant key acts for its "
    "tenant; an admin key manages tenants, reconcile runs and metrics. On the customer-scoped "
    "routes -- endpoints, deliveries and their attempts, the catalogue -- a portal session's "
    "token (`hps_...`) acts for its one customer, writing only with its capabilities.",
    auto_error=False,
)


async def get_principal(
    resources: ResourcesDep,
    request: Request,
    _declared: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
) -> Principal:
    return await authenticate(resources, request.headers.get("authorization"))


def bearer_token(authorization: str | None) -> str:
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("send Authorization: Bearer <api key>")
    return token


async def authenticate(resources: Resources, authorization: str | None) -> Principal:
    """Who sent ``Authorization``: the bootstrap admin key, or an API key (cached briefly). A
    customer's session token is no key: it reaches the customer-scoped routes alone; nor is a
    key for one endpoint, which reaches that endpoint's polls alone."""
    key = bearer_token(authorization)
    if is_session_token(key):
        raise Forbidden(
            "a portal session reaches only its customer's endpoints, deliveries and attempts, "
            "and the catalogue: this route needs an API key"
        )
    principal = await key_principal(resources, key)
    if principal.endpoint_id is not None:
        raise Forbidden(
            f"this key is for endpoint {principal.endpoint_id} alone: it polls that endpoint "
            "and acknowledges what it read (GET and POST /v1/endpoints/{id}/poll...), nothing "
            "else"
        )
    return principal


async def key_principal(resources: Resources, key: str) -> Principal:
    bootstrap = resources.settings.admin_api_key
    if bootstrap is not None and hmac.compare_digest(
        key.encode(), bootstrap.get_secret_value().encode()
    ):
        return Principal(tenant_id=None, is_admin=True)
    principal = await principal_for(resources.sessionmaker, resources.principals, key)
    if principal is None:
        raise Unauthorized("unknown or revoked API key")
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]


async def require_admin(principal: PrincipalDep) -> Principal:
    if not principal.is_admin:
        raise Forbidden("this route needs an admin key")
    return principal


async def require_tenant(principal: PrincipalDep) -> str:
    return tenant_of(principal)


def tenant_of(principal: Principal) -> str:
    if principal.tenant_id is None:
        raise Forbidden("this key is not bound to a tenant; use a tenant key")
    return principal.tenant_id


AdminDep = Annotated[Principal, Depends(require_admin)]
TenantDep = Annotated[str, Depends(require_tenant)]


async def require_tenant_scope(tenant_id: TenantDep) -> Scope:
    """A tenant key's scope: all of its tenant (the portal's is one customer's)."""
    return Scope(tenant_id)


ScopeDep = Annotated[Scope, Depends(require_tenant_scope)]


async def get_visitor(
    resources: ResourcesDep,
    request: Request,
    _declared: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
) -> Visitor:
    """Who a customer-scoped route acts for: a tenant key's whole tenant, or a portal
    session's one customer, found by the code the portal finds it with -- so the same ids
    answer 404 to both, and one customer's ids to another."""
    token = bearer_token(request.headers.get("authorization"))
    if not is_session_token(token):
        principal = await authenticate(resources, f"Bearer {token}")
        return tenant_visitor(tenant_of(principal), principal.actor)
    async with resources.sessionmaker() as session, session.begin():
        return await visitor_for(session, token)


VisitorDep = Annotated[Visitor, Depends(get_visitor)]


async def readable_scope(visitor: VisitorDep) -> Scope:
    return visitor.scope


async def managing_scope(visitor: VisitorDep) -> Scope:
    visitor.require("manage_endpoints")
    return visitor.scope


async def replaying_scope(visitor: VisitorDep) -> Scope:
    visitor.require("replay")
    return visitor.scope


# The customer-scoped routes (docs/portal.md, "The portal's data as an API"): what a portal
# session may read, manage with ``manage_endpoints``, and replay with ``replay``; a tenant
# key may do all three, for its whole tenant.
ReadScopeDep = Annotated[Scope, Depends(readable_scope)]
ManageScopeDep = Annotated[Scope, Depends(managing_scope)]
ReplayScopeDep = Annotated[Scope, Depends(replaying_scope)]


async def acting(visitor: VisitorDep) -> Actor:
    return visitor.actor


# Who is acting, for the audit trail: the key or the portal session the request came with.
ActorDep = Annotated[Actor, Depends(acting)]


async def parse_idempotency_key(
    idempotency_key: Annotated[
        str | None,
        Header(
            description="1-255 printable ASCII characters, bare or as a quoted string. "
            "Scoped to your tenant and kept for HERALD_IDEMPOTENCY_KEY_TTL_HOURS.",
        ),
    ] = None,
) -> str | None:
    return idempotency_key_from(idempotency_key)


def idempotency_key_from(header: str | None) -> str | None:
    """The key an ``Idempotency-Key`` header carries, or 400 when it is no valid key."""
    if header is None:
        return None
    key = header.strip()
    if len(key) >= 2 and key[0] == key[-1] == '"':
        # An RFC 8941 sf-string: unescape \" and \\.
        key = key[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    if not is_idempotency_key(key):
        raise BadRequest(f"Idempotency-Key {IDEMPOTENCY_KEY_RULE}")
    return key


IdempotencyKeyDep = Annotated[str | None, Depends(parse_idempotency_key)]


_MEDIA_TYPE = re.compile(r"^[a-z0-9!#$&^_.+-]+/[a-z0-9!#$&^_.+-]+$")


async def require_json_body(request: Request) -> None:
    """Every body Herald reads is JSON. One sent as anything else -- a form (``curl -d``
    without a Content-Type), text, no Content-Type at all -- is refused with 415 here, once for
    every route, rather than failing validation as "Input should be a valid dictionary"."""
    if getattr(request.scope.get("route"), "body_field", None) is None or not await request.body():
        return
    require_json_media_type(request.headers.get("content-type", ""))


def require_json_media_type(content_type: str) -> None:
    """415 unless ``content_type`` is one FastAPI parses as JSON."""
    media_type = content_type.partition(";")[0].strip().lower()
    if media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    ):
        return  # the media types FastAPI parses as JSON
    if not media_type:
        sent = "this request has none"
    elif _MEDIA_TYPE.fullmatch(media_type):  # echoed only when it is plainly a media type
        sent = f"not {media_type}"
    else:
        sent = "this request's is not JSON"
    raise UnsupportedMediaType(
        f"this route reads a JSON body: send it with Content-Type: application/json ({sent})"
    )


async def accept_trace(request: Request) -> AsyncIterator[str | None]:
    """The accept's span, under the producer's W3C trace if it sent one; the traceparent to keep
    with the event (app/core/tracing.py)."""
    with tracing.accepting(request.headers) as traceparent:
        yield traceparent


TraceparentDep = Annotated[str | None, Depends(accept_trace)]
