from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import AdminDep, SessionDep
from app.errors import (
    Conflict,
    Forbidden,
    Unauthorized,
    UnsupportedMediaType,
    problem_responses,
)
from app.tenants.repository import tenants
from app.tenants.schemas import TenantCreate, TenantCreated
from app.tenants.service.api_keys import issue_key

router = APIRouter(prefix="/v1/tenants", tags=["tenants"])


@router.post(
    "",
    status_code=201,
    response_model=TenantCreated,
    responses=problem_responses(Unauthorized, Forbidden, UnsupportedMediaType, Conflict),
    summary="Create a tenant and its first API key (admin)",
)
async def create_tenant(body: TenantCreate, _admin: AdminDep, session: SessionDep) -> TenantCreated:
    async with session.begin():
        tenant = await tenants.insert_tenant(session, body.name)
        if tenant is None:
            raise Conflict(f"a tenant named {body.name!r} already exists")
        key = await issue_key(session, tenant_id=tenant.id, is_admin=False)
    return TenantCreated(id=tenant.id, name=tenant.name, created_at=tenant.created_at, api_key=key)
