"""API keys: 256 random bits shown once, stored as SHA-256."""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy.ext.asyncio import AsyncSession

from app.repositories import api_keys, tenants

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
