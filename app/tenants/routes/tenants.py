from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import AdminDep, SessionDep
from app.api.pagination import Cursor, Limit, Page, decode_id_cursor, page_of
from app.api.problems import problem_responses
from app.core.errors import Conflict, Forbidden, Unauthorized, UnsupportedMediaType
from app.tenants.repository import tenants
from app.tenants.schemas import TenantCreate, TenantCreated, TenantOut
from app.tenants.service.api_keys import issue_key

router = APIRouter(prefix="/v1/tenants", tags=["tenants"])


@router.post(
    "",
    status_code=201,
    response_model=TenantCreated,
    responses=problem_responses(Unauthorized, Forbidden, UnsupportedMediaType, Conflict),
    summary="Create a tenant and its first API key (admin)",
)
async def create_tenant(body: TenantCreate, admin: AdminDep, session: SessionDep) -> TenantCreated:
    async with session.begin():
        tenant = await tenants.insert_tenant(session, body.name)
        if tenant is None:
            raise Conflict(f"a tenant named {body.name!r} already exists")
        issued = await issue_key(
            session, tenant_id=tenant.id, is_admin=False, label="first key", by=admin.actor
        )
    return TenantCreated(
        id=tenant.id, name=tenant.name, created_at=tenant.created_at, api_key=issued.key
    )


@router.get(
    "",
    response_model=Page[TenantOut],
    responses=problem_responses(Unauthorized, Forbidden),
    summary="List tenants, newest first (admin)",
)
async def list_tenants(
    _admin: AdminDep, session: SessionDep, limit: Limit = 50, cursor: Cursor = None
) -> Page[TenantOut]:
    async with session.begin():
        rows = await tenants.list_page(
            session, limit=limit + 1, before_id=decode_id_cursor(cursor, "ten")
        )
    return page_of(rows, limit, TenantOut.model_validate, lambda item: item.id)
