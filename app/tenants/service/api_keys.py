"""API keys: 256 random bits shown once, stored as SHA-256."""

from __future__ import annotations

import hashlib
import secrets
import time

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.tenants.repository import api_keys, tenants
from app.tenants.repository.api_keys import Principal as Principal

KEY_PREFIX = "hrk_"


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


async def issue_key(session: AsyncSession, *, tenant_id: str | None, is_admin: bool) -> str:
    key = generate_key()
    await api_keys.insert_key(
        session, tenant_id=tenant_id, is_admin=is_admin, key_hash=hash_key(key), prefix=key[:12]
    )
    return key


async def issue_key_for_tenant_name(session: AsyncSession, name: str, *, is_admin: bool) -> str:
    """`herald keys create --tenant NAME`: the tenant is created when it does not exist yet."""
    tenant = await tenants.get_or_create(session, name)
    return await issue_key(session, tenant_id=tenant.id, is_admin=is_admin)


class PrincipalCache:
    """Keys this process looked up lately, so a request need not pay a database round trip to
    authenticate. Only known keys are kept (an unknown key always asks the database, so a key
    works the moment it is created), and only for ``seconds``: a revoked key stops working
    within that. Bounded: when full, it starts over."""

    def __init__(self, seconds: float, max_entries: int = 10_000) -> None:
        self._seconds = seconds
        self._max_entries = max_entries
        self._entries: dict[bytes, tuple[float, Principal]] = {}

    def get(self, key_hash: bytes) -> Principal | None:
        entry = self._entries.get(key_hash)
        if entry is None:
            return None
        if entry[0] <= time.monotonic():
            del self._entries[key_hash]
            return None
        return entry[1]

    def put(self, key_hash: bytes, principal: Principal) -> None:
        if self._seconds <= 0:
            return
        if len(self._entries) >= self._max_entries:
            self._entries.clear()
        self._entries[key_hash] = (time.monotonic() + self._seconds, principal)


async def principal_for(
    sessionmaker: async_sessionmaker[AsyncSession], cache: PrincipalCache, key: str
) -> Principal | None:
    """Who ``key`` is: from this process's cache, else from the database (then cached).
    None for an unknown or revoked key."""
    key_hash = hash_key(key)
    principal = cache.get(key_hash)
    if principal is None:
        async with sessionmaker() as session:
            principal = await api_keys.find_principal(session, key_hash)
        if principal is not None:
            cache.put(key_hash, principal)
    return principal
