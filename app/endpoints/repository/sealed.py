"""An endpoint's sealed columns, page by page, for ``herald secrets rotate``."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Endpoint

# Every sealed column of an endpoint, with the purpose it is sealed for (app/core/sealing.py).
SEALED_COLUMNS = {
    "secret_sealed": "signing",
    "previous_secret_sealed": "signing",
    "secret_headers_sealed": "headers",
    "signing_key_sealed": "ed25519",
    "previous_signing_key_sealed": "ed25519",
    "oauth2_secret_sealed": "oauth2",
    "tls_sealed": "tls",
    "previous_tls_sealed": "tls",
    "egress_proxy_sealed": "proxy",
}


async def sealed_page(
    session: AsyncSession, *, after_id: str, limit: int
) -> list[tuple[str, dict[str, bytes | None]]]:
    """Endpoints (deleted ones too: their rows keep their secrets) after ``after_id`` in id
    order, with their sealed columns -- a page of ``herald secrets rotate``."""
    columns = [getattr(Endpoint, name) for name in SEALED_COLUMNS]
    rows = await session.execute(
        select(Endpoint.id, *columns)
        .where(Endpoint.id > after_id)
        .order_by(Endpoint.id)
        .limit(limit)
    )
    return [(row[0], dict(zip(SEALED_COLUMNS, row[1:], strict=True))) for row in rows]


async def replace_sealed(
    session: AsyncSession, endpoint_id: str, column: str, *, was: bytes, now: bytes
) -> bool:
    """Re-sealed in place only if the column still holds what was read: a rotation of the
    signing secret meanwhile wins, and is already sealed under the new key."""
    target = getattr(Endpoint, column)
    result = await session.execute(
        update(Endpoint)
        .where(Endpoint.id == endpoint_id, target == was)
        .values({column: now})
        .returning(Endpoint.id)
    )
    return result.scalar_one_or_none() is not None
