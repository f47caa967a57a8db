"""API keys over HTTP: a tenant lists, creates and revokes its own; an admin any tenant's.
The secret is shown once, when the key is made; lists show its first characters."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import PrincipalDep, SessionDep
from app.api.pagination import Cursor, Limit, Page, decode_id_cursor, page_of
from app.api.paths import KeyIdPath
from app.api.problems import problem_responses
from app.core.errors import (
    Forbidden,
    NotFound,
    Unauthorized,
    Unprocessable,
    UnsupportedMediaType,
)
from app.core.fields import TenantId
from app.runtime.resources import ResourcesDep
from app.tenants.repository import api_keys as key_rows
from app.tenants.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyOut
from app.tenants.service import api_keys

router = APIRouter(prefix="/v1/api-keys", tags=["tenants"])
_AUTH = (Unauthorized, Forbidden)


@router.get(
    "",
    response_model=Page[ApiKeyOut],
    responses=problem_responses(*_AUTH, NotFound),
    summary="List API keys, newest first: a tenant's own; an admin's, any tenant's or all",
)
async def list_keys(
    principal: PrincipalDep,
    session: SessionDep,
    tenant_id: Annotated[TenantId | None, Query(description="Admins: one tenant's keys.")] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Page[ApiKeyOut]:
    scope = api_keys.scope_of(principal, tenant_id)
    async with session.begin():
        rows = await key_rows.list_page(
            session,
            tenant_id=scope,
            every_tenant=scope is None,
            limit=limit + 1,
            before_id=decode_id_cursor(cursor, "key"),
            with_admin_keys=principal.is_admin,
        )
    return page_of(rows, limit, ApiKeyOut.model_validate, lambda item: item.id)


@router.post(
    "",
    status_code=201,
    response_model=ApiKeyCreated,
    responses=problem_responses(*_AUTH, NotFound, Unprocessable, UnsupportedMediaType),
    summary="Create an API key for your tenant (an admin: for the tenant named), or for one "
    "of its polling endpoints",
)
async def create_key(
    body: ApiKeyCreate, principal: PrincipalDep, session: SessionDep
) -> ApiKeyCreated:
    async with session.begin():
        issued = await api_keys.create_key(
            session,
            principal,
            tenant_id=body.tenant_id,
            label=body.label,
            endpoint_id=body.endpoint_id,
        )
    shown = ApiKeyOut.model_validate(issued.row)
    return ApiKeyCreated(**shown.model_dump(), key=issued.key)


@router.post(
    "/{key_id}/revoke",
    response_model=ApiKeyOut,
    responses=problem_responses(*_AUTH, NotFound),
    summary="Revoke an API key: refused everywhere within the key cache's time",
    description="This API process refuses the key at once; every other within "
    "`HERALD_API_KEY_CACHE_SECONDS` (5 s by default). Revoking twice keeps the first time.",
)
async def revoke_key(
    # The key first: an unauthenticated request learns nothing, not even that an id is malformed.
    principal: PrincipalDep,
    key_id: KeyIdPath,
    session: SessionDep,
    resources: ResourcesDep,
) -> ApiKeyOut:
    async with session.begin():
        revoked = await api_keys.revoke_key(
            session, principal, key_id, resources.principals, by=principal.actor
        )
    return ApiKeyOut.model_validate(revoked)
