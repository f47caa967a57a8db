"""A tenant's portal settings: its look, and the origins that may frame it."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.service import audit
from app.core.actors import Actor
from app.core.errors import Unprocessable
from app.models import PortalSettings
from app.portal.repository import portal_settings
from app.portal.schemas import (
    LOGO_MAX_BYTES,
    PortalSettingsOut,
    PortalSettingsPatch,
    PortalSettingsPut,
)
from app.tenants.service.tenants import get_tenant


async def put_settings(
    session: AsyncSession, tenant_id: str, spec: PortalSettingsPut, *, by: Actor
) -> PortalSettings:
    """Replace the settings whole: a field left out is the default again."""
    if spec.logo_url is not None and spec.logo_upload is not None:
        raise Unprocessable("give logo_url or logo_upload, not both")
    logo, logo_type = _uploaded(spec.logo_upload) if spec.logo_upload else (None, None)
    values = spec.model_dump(exclude={"logo_upload"})
    return await _stored(session, tenant_id, {**values, "logo": logo, "logo_type": logo_type}, by)


async def patch_settings(
    session: AsyncSession, tenant_id: str, change: PortalSettingsPatch, *, by: Actor
) -> PortalSettings:
    """Change the fields ``change`` names, the rest kept as they are. The row is locked while
    it is read and written, so two changes at once both land."""
    current = await portal_settings.get(session, tenant_id, for_update=True)
    values: dict[str, Any] = {
        "name": current.name if current else None,
        "logo_url": current.logo_url if current else None,
        "accent_color": current.accent_color if current else None,
        "allowed_origins": list(current.allowed_origins) if current else [],
        "logo": current.logo if current else None,
        "logo_type": current.logo_type if current else None,
    }
    sent = change.model_fields_set
    if change.logo_url is not None and change.logo_upload is not None:
        raise Unprocessable("give logo_url or logo_upload, not both")
    for name in sent & {"name", "accent_color", "logo_url"}:
        values[name] = getattr(change, name)
    if "allowed_origins" in sent:
        values["allowed_origins"] = change.allowed_origins or []
    if "logo_upload" in sent:
        uploaded = _uploaded(change.logo_upload) if change.logo_upload else (None, None)
        values["logo"], values["logo_type"] = uploaded
    # One logo at a time: the one just given replaces the other kind.
    if change.logo_url is not None:
        values["logo"] = values["logo_type"] = None
    if change.logo_upload is not None:
        values["logo_url"] = None
    return await _stored(session, tenant_id, values, by)


async def _stored(
    session: AsyncSession, tenant_id: str, values: dict[str, Any], by: Actor
) -> PortalSettings:
    logo_url = values["logo_url"]
    if logo_url is not None and _origin_of(logo_url) not in values["allowed_origins"]:
        raise Unprocessable(
            "logo_url must be on one of allowed_origins: the portal's CSP loads images from "
            "those origins alone"
        )
    current = await portal_settings.get(session, tenant_id, for_update=True)
    was = _view(vars(current) if current is not None else None)
    stored = await portal_settings.put(session, tenant_id, values)
    await audit.record(
        session, tenant_id, by, "portal_settings.updated", None, before=was, after=_view(values)
    )
    return stored


def _view(values: dict[str, Any] | None) -> dict[str, Any]:
    """What the audit trail keeps of the settings: an uploaded logo by its type and size."""
    if values is None:
        return {"name": None, "logo_url": None, "accent_color": None, "allowed_origins": []}
    logo = values.get("logo")
    return {
        "name": values.get("name"),
        "logo_url": values.get("logo_url"),
        "accent_color": values.get("accent_color"),
        "allowed_origins": list(values.get("allowed_origins") or []),
        "logo_upload": None if logo is None else f"{values.get('logo_type')}, {len(logo)} bytes",
    }


# What an uploaded logo may be, told by its first bytes whatever the data URL claims. No SVG:
# it is a document that can carry script.
_SIGNATURES = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/webp": (b"RIFF",),
}


def _uploaded(data_url: str) -> tuple[bytes, str]:
    head, comma, encoded = data_url.partition(",")
    media_type = head.removeprefix("data:").removesuffix(";base64")
    if not comma or not head.startswith("data:") or not head.endswith(";base64"):
        raise Unprocessable("logo_upload must be a data URL: data:image/png;base64,...")
    if media_type not in _SIGNATURES:
        raise Unprocessable("logo_upload must be a PNG, JPEG or WebP image")
    try:
        logo = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise Unprocessable("logo_upload's data is not base64") from None
    if len(logo) > LOGO_MAX_BYTES:
        raise Unprocessable(f"logo_upload must be at most {LOGO_MAX_BYTES // 1024} KiB")
    webp = media_type != "image/webp" or logo[8:12] == b"WEBP"
    if not logo.startswith(_SIGNATURES[media_type]) or not webp:
        raise Unprocessable(f"logo_upload's bytes are not a {media_type.split('/')[1]} image")
    return logo, media_type


async def logo_of(session: AsyncSession, tenant_id: str) -> tuple[bytes, str] | None:
    settings = await portal_settings.get(session, tenant_id)
    if settings is None or settings.logo is None or settings.logo_type is None:
        return None
    return settings.logo, settings.logo_type


def shown(settings: PortalSettings | None) -> PortalSettingsOut:
    """The settings as the API answers them (the defaults, until set)."""
    if settings is None:
        return PortalSettingsOut(
            name=None,
            logo_url=None,
            logo_uploaded=False,
            accent_color=None,
            allowed_origins=[],
            updated_at=None,
        )
    return PortalSettingsOut(
        name=settings.name,
        logo_url=settings.logo_url,
        logo_uploaded=settings.logo is not None,
        accent_color=settings.accent_color,
        allowed_origins=settings.allowed_origins,
        updated_at=settings.updated_at,
    )


async def get_settings(session: AsyncSession, tenant_id: str) -> PortalSettings | None:
    return await portal_settings.get(session, tenant_id)


def _origin_of(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"


@dataclass(frozen=True)
class Look:
    """What a portal page shows of its tenant's settings, and where it may be framed."""

    name: str
    logo_url: str | None  # where the page loads it from: the tenant's origin, or here
    accent_color: str
    allowed_origins: tuple[str, ...]


DEFAULT_ACCENT = "#1f5fbf"


async def look_of(session: AsyncSession, tenant_id: str, session_id: str) -> Look:
    settings = await portal_settings.get(session, tenant_id)
    tenant = await get_tenant(session, tenant_id)
    fallback = tenant.name if tenant is not None else "Webhooks"
    if settings is None:
        return Look(fallback, None, DEFAULT_ACCENT, ())
    uploaded = f"/portal/s/{session_id}/logo" if settings.logo is not None else None
    return Look(
        settings.name or fallback,
        uploaded or settings.logo_url,
        settings.accent_color or DEFAULT_ACCENT,
        tuple(settings.allowed_origins),
    )
