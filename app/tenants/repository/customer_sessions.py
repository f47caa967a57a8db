"""Who a customer's session token is: the live portal session it opens. Read by every request a
customer makes -- the portal's and the customer-scoped /v1 routes' -- so it lives with the
other callers' identities (api_keys.py); the portal mints, lists and ends sessions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession


@dataclass(frozen=True)
class LiveSession:
    id: str
    tenant_id: str
    customer_id: str
    capabilities: list[str]
    expires_at: datetime


_FIND = text("""
SELECT s.id, s.tenant_id, s.customer_id, s.capabilities, s.expires_at
  FROM portal_sessions AS s
  JOIN customers AS c ON c.tenant_id = s.tenant_id AND c.id = s.customer_id
 WHERE s.session_hash = :session_hash AND s.expires_at > now() AND s.revoked_at IS NULL
   AND c.deleted_at IS NULL AND c.created_at <= s.created_at
   AND NOT EXISTS (
       SELECT 1 FROM api_keys AS k WHERE k.id = s.api_key_id AND k.revoked_at IS NOT NULL
   )
""")


async def find(session: AsyncSession, session_hash: bytes) -> LiveSession | None:
    """The live session a token opens: not expired, not revoked (nor the key that minted it),
    its customer standing -- and the same customer it was minted for: one deleted and put
    again starts anew, and no session of its earlier life opens (customers.put)."""
    row = (await session.execute(_FIND, {"session_hash": session_hash})).one_or_none()
    return None if row is None else LiveSession(*row)
