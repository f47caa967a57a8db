"""Whose data a request may touch. Tenant isolation and customer isolation are one code path:
every query that finds an endpoint (and, through endpoints, what was sent to them) is narrowed
by a ``Scope``, so another tenant's id and another customer's id find nothing alike -- 404."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scope:
    tenant_id: str
    # None: the whole tenant (its API keys, the console). A customer's id: that customer's
    # endpoints alone (the portal, whose scope comes from its session, never from a request).
    customer_id: str | None = None
