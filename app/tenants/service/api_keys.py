"""API keys: 256 random bits shown once, stored as SHA-256."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.audit.service import audit
from app.core.actors import Actor
from app.core.caches import SharedCache
from app.core.errors import NotFound, Unprocessable
from app.models import ApiKey
from app.tenants.repository import api_keys, tenants
from app.tenants.repository.api_keys import Principal as Principal

KEY_PREFIX = "hrk_"


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


@dataclass(frozen=True)
class IssuedKey:
    row: ApiKey
    key: str  # the secret: shown once, never stored


async def issue_key(
    session: AsyncSession,
    *,
    tenant_id: str | None,
    is_admin: bool,
    label: str | None = None,
    endpoint_id: str | None = None,
    by: Actor,
) -> IssuedKey:
    key = generate_key()
    row = await api_keys.insert_key(
        session,
        tenant_id=tenant_id,
        is_admin=is_admin,
        key_hash=hash_key(key),
        prefix=key[:12],
        label=label,
        endpoint_id=endpoint_id,
    )
    if tenant_id is not None:
        shown = {"label": label, "prefix": row.display_prefix, "admin": is_admin}
        if endpoint_id is not None:
            shown["endpoint_id"] = endpoint_id
        await audit.record(session, tenant_id, by, "api_key.created", row.id, after=shown)
    return IssuedKey(row, key)


async def issue_key_for_tenant_name(
    session: AsyncSession, name: str, *, is_admin: bool, label: str | None = None, by: Actor
) -> IssuedKey:
    """`herald keys create --tenant NAME`: the tenant is created when it does not exist yet."""
    tenant = await tenants.get_or_create(session, name)
    return await issue_key(session, tenant_id=tenant.id, is_admin=is_admin, label=label, by=by)


async def tenant_keys(
    session: AsyncSession, tenant_id: str, *, limit: int, before_id: str | None = None
) -> list[ApiKey]:
    """A tenant's own keys, newest first (the console's list)."""
    return await api_keys.list_page(
        session,
        tenant_id=tenant_id,
        every_tenant=False,
        limit=limit,
        before_id=before_id,
        with_admin_keys=False,
    )


def scope_of(principal: Principal, tenant_id: str | None) -> str | None:
    """Whose keys a request may see or change: a tenant key its own tenant's only (another
    tenant's answers as not found); an admin any tenant's, or -- with none named -- every key.
    Returns the tenant to hold the request to, or None for an admin's every key."""
    if principal.is_admin:
        return tenant_id
    if tenant_id is not None and tenant_id != principal.tenant_id:
        raise NotFound(f"tenant {tenant_id} not found")
    return principal.tenant_id


async def create_key(
    session: AsyncSession,
    principal: Principal,
    *,
    tenant_id: str | None,
    label: str | None,
    endpoint_id: str | None = None,
) -> IssuedKey:
    """A tenant key, for the caller's tenant or (an admin's call) the one named; with
    ``endpoint_id``, a key for that one polling endpoint of the tenant. Admin keys are not
    made over HTTP: `herald keys create --admin`."""
    target = scope_of(principal, tenant_id)
    if target is None:
        raise Unprocessable("tenant_id: an admin creates a key for a named tenant")
    if await tenants.get(session, target) is None:
        raise NotFound(f"tenant {target} not found")
    if endpoint_id is not None:
        delivery = await api_keys.endpoint_delivery(session, target, endpoint_id)
        if delivery is None:
            raise NotFound(f"endpoint {endpoint_id} not found")
        if delivery != "poll":
            raise Unprocessable(
                f"endpoint_id: endpoint {endpoint_id} is sent its deliveries: a key for one "
                "endpoint is for a polling endpoint's receiver"
            )
    return await issue_key(
        session,
        tenant_id=target,
        is_admin=False,
        label=label,
        endpoint_id=endpoint_id,
        by=principal.actor,
    )


async def revoke_key(
    session: AsyncSession, principal: Principal, key_id: str, cache: PrincipalCache, *, by: Actor
) -> ApiKey:
    """Revoke; this process forgets the key at once, every other within the key cache's time
    (``HERALD_API_KEY_CACHE_SECONDS``)."""
    revoked = await api_keys.revoke(
        session, key_id, tenant_id=None if principal.is_admin else principal.tenant_id
    )
    if revoked is None:
        raise NotFound(f"API key {key_id} not found")
    cache.forget(revoked.key_hash)
    if revoked.tenant_id is not None:
        await audit.record(
            session,
            revoked.tenant_id,
            by,
            "api_key.revoked",
            key_id,
            before={"label": revoked.label, "prefix": revoked.display_prefix},
        )
    return revoked


class PrincipalCache:
    """Keys this process looked up lately, so a request need not pay a database round trip to
    authenticate. Only known keys are kept (an unknown key always asks the database, so a key
    works the moment it is created), and only for ``seconds``: a revoked key stops working
    within that. Each tenant has a share (app/core/caches.py): one with many keys pushes out its
    own, never another tenant's."""

    def __init__(self, seconds: float, per_tenant: int = 100, total: int = 10_000) -> None:
        self._entries: SharedCache[bytes, Principal] = SharedCache(
            per_tenant=per_tenant, total=total, seconds=seconds
        )

    def get(self, key_hash: bytes) -> Principal | None:
        return self._entries.get(key_hash)

    def forget(self, key_hash: bytes) -> None:
        self._entries.forget(key_hash)

    def put(self, key_hash: bytes, principal: Principal) -> None:
        self._entries.put(principal.tenant_id or "admin", key_hash, principal)


async def principal_for(
    sessionmaker: async_sessionmaker[AsyncSession], cache: PrincipalCache, key: str
) -> Principal | None:
    """Who ``key`` is: from this process's cache, else from the database (then cached).
    None for an unknown or revoked key."""
    key_hash = hash_key(key)
    principal = cache.get(key_hash)
    if principal is None:
        async with sessionmaker() as session, session.begin():  # commits the last-use mark
            principal = await api_keys.find_principal(session, key_hash)
        if principal is not None:
            cache.put(key_hash, principal)
    return principal


async def keys_of(session: AsyncSession, *, tenant_name: str | None) -> list[ApiKey]:
    """`herald keys list`: every key, newest first, or one tenant's (none for an unknown name)."""
    tenant_id = None
    if tenant_name is not None:
        tenant = await tenants.find_by_name(session, tenant_name)
        if tenant is None:
            return []
        tenant_id = tenant.id
    return await api_keys.list_page(
        session, tenant_id=tenant_id, every_tenant=tenant_id is None, limit=100_000, before_id=None
    )
