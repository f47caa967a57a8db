"""A tenant's portal settings: its look, and the origins that may frame it."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.errors import Unprocessable
from app.models import PortalSettings
from app.portal.repository import portal_settings
from app.portal.schemas import PortalSettingsPut
from app.tenants.service.tenants import get_tenant


async def put_settings(
    session: AsyncSession, tenant_id: str, spec: PortalSettingsPut
) -> PortalSettings:
    if spec.logo_url is not None and _origin_of(spec.logo_url) not in spec.allowed_origins:
        raise Unprocessable(
            "logo_url must be on one of allowed_origins: the portal's CSP loads images from "
            "those origins alone"
        )
    return await portal_settings.put(session, tenant_id, spec.model_dump())


async def get_settings(session: AsyncSession, tenant_id: str) -> PortalSettings | None:
    return await portal_settings.get(session, tenant_id)


def _origin_of(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"


@dataclass(frozen=True)
class Look:
    """What a portal page shows of its tenant's settings, and where it may be framed."""

    name: str
    logo_url: str | None
    accent_color: str
    allowed_origins: tuple[str, ...]


DEFAULT_ACCENT = "#1f5fbf"


async def look_of(session: AsyncSession, tenant_id: str) -> Look:
    settings = await portal_settings.get(session, tenant_id)
    tenant = await get_tenant(session, tenant_id)
    fallback = tenant.name if tenant is not None else "Webhooks"
    if settings is None:
        return Look(fallback, None, DEFAULT_ACCENT, ())
    return Look(
        settings.name or fallback,
        settings.logo_url,
        settings.accent_color or DEFAULT_ACCENT,
        tuple(settings.allowed_origins),
    )
