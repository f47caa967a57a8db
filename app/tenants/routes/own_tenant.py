"""The caller's own tenant: what it is, and the settings it sets itself (the operator sets its
limits: limits.py)."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import ActorDep, SessionDep, SettingsDep, TenantDep
from app.api.problems import problem_responses
from app.core.errors import Forbidden, Unauthorized, Unprocessable, UnsupportedMediaType
from app.tenants.schemas import TenantSettingsChange, TenantSettingsOut
from app.tenants.service import tenants

router = APIRouter(prefix="/v1/tenant", tags=["tenants"])


@router.get(
    "",
    response_model=TenantSettingsOut,
    responses=problem_responses(Unauthorized, Forbidden),
    summary="This tenant, and the settings it sets itself",
)
async def own_tenant(tenant_id: TenantDep, session: SessionDep) -> TenantSettingsOut:
    async with session.begin():
        return TenantSettingsOut.model_validate(await tenants.own(session, tenant_id))


@router.patch(
    "",
    response_model=TenantSettingsOut,
    responses=problem_responses(Unauthorized, Forbidden, Unprocessable, UnsupportedMediaType),
    summary="Change this tenant's own settings",
)
async def change_own_tenant(
    change: TenantSettingsChange,
    tenant_id: TenantDep,
    by: ActorDep,
    session: SessionDep,
    settings: SettingsDep,
) -> TenantSettingsOut:
    async with session.begin():
        changed = await tenants.change_own(
            session,
            tenant_id,
            change.model_dump(include=change.model_fields_set),
            bounds=tenants.RetentionBounds(
                settings.retention_days, settings.idempotency_key_ttl_hours
            ),
            by=by,
        )
        return TenantSettingsOut.model_validate(changed)
