"""The console's signing keys, one row per purpose, read with the database's clock: every API
process then agrees both on the key and on the time."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import ConsoleSecret

_READ = text("""
SELECT sealed, floor(extract(epoch FROM now()))::bigint AS now
  FROM console_secrets
 WHERE purpose = :purpose
""")


async def read(session: AsyncSession, purpose: str) -> tuple[bytes, int] | None:
    """The key for ``purpose``, sealed, and the database's time in whole seconds; None if none
    is made."""
    row = (await session.execute(_READ, {"purpose": purpose})).one_or_none()
    return None if row is None else (bytes(row.sealed), int(row.now))


async def create(session: AsyncSession, purpose: str, sealed: bytes) -> None:
    """Stores the key, ``sealed``, unless another process stored one first (then theirs
    stands)."""
    await session.execute(
        insert(ConsoleSecret)
        .values(purpose=purpose, sealed=sealed)
        .on_conflict_do_nothing(index_elements=["purpose"])
    )


async def all_sealed(session: AsyncSession) -> list[tuple[str, bytes]]:
    rows = await session.execute(text("SELECT purpose, sealed FROM console_secrets"))
    return [(row.purpose, bytes(row.sealed)) for row in rows]


async def replace(session: AsyncSession, purpose: str, *, was: bytes, now: bytes) -> None:
    await session.execute(
        text("UPDATE console_secrets SET sealed = :now WHERE purpose = :purpose AND sealed = :was"),
        {"purpose": purpose, "was": was, "now": now},
    )
