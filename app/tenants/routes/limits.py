"""What a tenant may use: the operator sets it (admin), the tenant reads its own."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import AdminDep, SessionDep, SettingsDep, TenantDep
from app.api.paths import TenantIdPath
from app.api.problems import problem_responses
from app.core.errors import Forbidden, NotFound, Unauthorized, UnsupportedMediaType
from app.models import Tenant
from app.tenants.schemas import LimitsChange, LimitsOut
from app.tenants.service import limits

router = APIRouter(tags=["tenants"])


def _shown(tenant: Tenant, defaults: limits.Limits) -> LimitsOut:
    effective = defaults.of(tenant)
    return LimitsOut(
        tenant_id=tenant.id,
        max_endpoints=effective.max_endpoints,
        max_endpoints_per_customer=effective.max_endpoints_per_customer,
        max_fanout=effective.max_fanout,
        accept_rate=effective.accept_rate,
        delivery_rate=effective.delivery_rate,
        set_by_operator=limits.set_by_operator(tenant),
    )


@router.get(
    "/v1/limits",
    response_model=LimitsOut,
    responses=problem_responses(Unauthorized, Forbidden),
    summary="What this tenant may use",
)
async def own_limits(tenant_id: TenantDep, session: SessionDep, settings: SettingsDep) -> LimitsOut:
    async with session.begin():
        tenant = await limits.tenant_of(session, tenant_id)
    return _shown(tenant, limits.Limits.defaults(settings))


@router.get(
    "/v1/tenants/{tenant_id}/limits",
    response_model=LimitsOut,
    responses=problem_responses(Unauthorized, Forbidden, NotFound),
    summary="What a tenant may use (admin)",
)
async def tenant_limits(
    _admin: AdminDep, tenant_id: TenantIdPath, session: SessionDep, settings: SettingsDep
) -> LimitsOut:
    async with session.begin():
        tenant = await limits.tenant_of(session, tenant_id)
    return _shown(tenant, limits.Limits.defaults(settings))


@router.patch(
    "/v1/tenants/{tenant_id}/limits",
    response_model=LimitsOut,
    responses=problem_responses(Unauthorized, Forbidden, NotFound, UnsupportedMediaType),
    summary="Set what a tenant may use (admin)",
)
async def change_limits(
    admin: AdminDep,
    tenant_id: TenantIdPath,
    change: LimitsChange,
    session: SessionDep,
    settings: SettingsDep,
) -> LimitsOut:
    async with session.begin():
        tenant = await limits.set_limits(
            session, tenant_id, change.model_dump(include=change.model_fields_set), by=admin.actor
        )
    return _shown(tenant, limits.Limits.defaults(settings))
