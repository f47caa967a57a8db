"""The tenant's side of the portal: minting sessions for its customers, its settings."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request, Response

from app.api.deps import ActorDep, PrincipalDep, SessionDep, SettingsDep, TenantDep
from app.api.pagination import Cursor, Limit, Page, decode_id_cursor, page_of
from app.api.paths import PortalSessionIdPath
from app.api.problems import problem_responses
from app.core.errors import Forbidden, NotFound, Unauthorized, UnsupportedMediaType
from app.core.fields import CustomerId, KeyId
from app.portal.schemas import (
    PortalSessionCreate,
    PortalSessionCreated,
    PortalSessionOut,
    PortalSessionsRevoke,
    PortalSettingsOut,
    PortalSettingsPatch,
    PortalSettingsPut,
    SessionsRevoked,
)
from app.portal.service import sessions, settings

router = APIRouter(tags=["portal"])
_AUTH = (Unauthorized, Forbidden)


@router.post(
    "/v1/portal-sessions",
    status_code=201,
    response_model=PortalSessionCreated,
    responses=problem_responses(*_AUTH, UnsupportedMediaType, NotFound),
    summary="Mint a portal session for one customer: a one-time link to its portal",
)
async def mint_portal_session(
    body: PortalSessionCreate,
    tenant_id: TenantDep,
    principal: PrincipalDep,
    session: SessionDep,
    config: SettingsDep,
    request: Request,
) -> PortalSessionCreated:
    async with session.begin():
        minted = await sessions.mint(session, tenant_id, body, principal.key_id)
    base = str(config.public_url or request.base_url).rstrip("/")
    row = minted.session
    return PortalSessionCreated(
        id=row.id,
        customer_id=row.customer_id,
        capabilities=row.capabilities,
        url=f"{base}/portal/s/{row.id}#t={minted.link_token}",
        link_expires_at=row.link_expires_at,
        expires_at=row.expires_at,
    )


@router.get(
    "/v1/portal-sessions",
    response_model=Page[PortalSessionOut],
    responses=problem_responses(*_AUTH),
    summary="The tenant's portal sessions, newest first: one customer's, or one key's",
)
async def list_portal_sessions(
    tenant_id: TenantDep,
    session: SessionDep,
    customer_id: CustomerId | None = None,
    api_key_id: KeyId | None = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Page[PortalSessionOut]:
    async with session.begin():
        listed = await sessions.list_sessions(
            session,
            tenant_id,
            customer_id=customer_id,
            api_key_id=api_key_id,
            limit=limit + 1,
            before_id=decode_id_cursor(cursor, "pts"),
        )
    now = datetime.now(UTC)

    def shown(item: sessions.Listed) -> PortalSessionOut:
        row = item.row
        return PortalSessionOut(
            id=row.id,
            customer_id=row.customer_id,
            capabilities=row.capabilities,
            api_key_id=row.api_key_id,
            status=sessions.status_of(item, now),
            created_at=row.created_at,
            link_expires_at=row.link_expires_at,
            opened_at=row.exchanged_at,
            expires_at=row.expires_at,
            revoked_at=row.revoked_at,
        )

    return page_of(listed, limit, shown, lambda item: item.id)


@router.post(
    "/v1/portal-sessions/revoke",
    response_model=SessionsRevoked,
    responses=problem_responses(*_AUTH, UnsupportedMediaType),
    summary="End every running portal session of a customer, or minted by a key",
)
async def revoke_portal_sessions(
    body: PortalSessionsRevoke, tenant_id: TenantDep, session: SessionDep
) -> SessionsRevoked:
    async with session.begin():
        revoked = await sessions.revoke_matching(
            session, tenant_id, customer_id=body.customer_id, api_key_id=body.api_key_id
        )
    return SessionsRevoked(revoked=revoked)


@router.delete(
    "/v1/portal-sessions/{session_id}",
    status_code=204,
    responses=problem_responses(*_AUTH, NotFound),
    summary="End a portal session now (its link too, if unused)",
)
async def revoke_portal_session(
    tenant_id: TenantDep, session_id: PortalSessionIdPath, session: SessionDep
) -> Response:
    async with session.begin():
        await sessions.revoke(session, tenant_id, session_id)
    return Response(status_code=204)


@router.put(
    "/v1/portal-settings",
    response_model=PortalSettingsOut,
    responses=problem_responses(*_AUTH, UnsupportedMediaType),
    summary="Replace the portal's settings whole: name, logo, accent colour, embedding origins",
    description="Every field left out goes back to its default (`allowed_origins` to none: "
    "no page may frame the portal). To change some fields and keep the rest, use PATCH.",
)
async def put_portal_settings(
    body: PortalSettingsPut, tenant_id: TenantDep, by: ActorDep, session: SessionDep
) -> PortalSettingsOut:
    async with session.begin():
        stored = await settings.put_settings(session, tenant_id, body, by=by)
    return settings.shown(stored)


@router.patch(
    "/v1/portal-settings",
    response_model=PortalSettingsOut,
    responses=problem_responses(*_AUTH, UnsupportedMediaType),
    summary="Change some of the portal's settings, keeping the rest",
)
async def patch_portal_settings(
    body: PortalSettingsPatch, tenant_id: TenantDep, by: ActorDep, session: SessionDep
) -> PortalSettingsOut:
    async with session.begin():
        stored = await settings.patch_settings(session, tenant_id, body, by=by)
    return settings.shown(stored)


@router.get(
    "/v1/portal-settings",
    response_model=PortalSettingsOut,
    responses=problem_responses(*_AUTH),
    summary="The portal's settings (the defaults, until set)",
)
async def get_portal_settings(tenant_id: TenantDep, session: SessionDep) -> PortalSettingsOut:
    async with session.begin():
        stored = await settings.get_settings(session, tenant_id)
    return settings.shown(stored)
