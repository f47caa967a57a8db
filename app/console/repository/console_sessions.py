"""Console sessions: opened at sign-in, found on every page, closed at sign-out. A session is
only found while it has not expired and the key it came from still stands (not revoked; the
bootstrap admin key is not a row, so its hash is passed in)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, insert, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.ids import new_id
from app.models import ConsoleSession


@dataclass(frozen=True)
class OpenSession:
    id: str
    tenant_id: str | None
    is_admin: bool
    csrf_token: str
    viewing_tenant_id: str | None


async def open_session(
    session: AsyncSession,
    *,
    token_hash: bytes,
    key_hash: bytes,
    tenant_id: str | None,
    is_admin: bool,
    csrf_token: str,
    lasts: timedelta,
) -> None:
    await session.execute(
        insert(ConsoleSession).values(
            id=new_id("ses"),
            token_hash=token_hash,
            key_hash=key_hash,
            tenant_id=tenant_id,
            is_admin=is_admin,
            csrf_token=csrf_token,
            expires_at=text("now() + :lasts").bindparams(lasts=lasts),
        )
    )


_FIND = text("""
SELECT s.id, s.tenant_id, s.is_admin, s.csrf_token, s.viewing_tenant_id
  FROM console_sessions AS s
 WHERE s.token_hash = :token_hash AND s.expires_at > now()
   AND (s.key_hash = :bootstrap_hash
        OR EXISTS (SELECT 1 FROM api_keys AS k
                    WHERE k.key_hash = s.key_hash AND k.revoked_at IS NULL))
""")


async def find(
    session: AsyncSession, *, token_hash: bytes, bootstrap_hash: bytes | None
) -> OpenSession | None:
    row = (
        await session.execute(
            _FIND, {"token_hash": token_hash, "bootstrap_hash": bootstrap_hash or b""}
        )
    ).one_or_none()
    if row is None:
        return None
    return OpenSession(row.id, row.tenant_id, row.is_admin, row.csrf_token, row.viewing_tenant_id)


async def view_tenant(session: AsyncSession, *, session_id: str, tenant_id: str | None) -> None:
    await session.execute(
        update(ConsoleSession)
        .where(ConsoleSession.id == session_id)
        .values(viewing_tenant_id=tenant_id)
    )


async def close(session: AsyncSession, *, token_hash: bytes) -> None:
    await session.execute(delete(ConsoleSession).where(ConsoleSession.token_hash == token_hash))


async def purge_expired(session: AsyncSession) -> int:
    """Sessions past their end, removed (a sign-in sweeps them: there are few)."""
    result = await session.execute(text("DELETE FROM console_sessions WHERE expires_at <= now()"))
    return int(result.rowcount)  # type: ignore[attr-defined]
