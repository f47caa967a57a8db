"""A tenant's customers and their portal sessions (``herald.customers``,
``herald.portal_sessions``), sync and async."""

from __future__ import annotations

from typing import TYPE_CHECKING

from herald_client import _calls
from herald_client.models import (
    Customer,
    Page,
    PortalSession,
    PortalSessionListed,
    SessionsRevoked,
)

if TYPE_CHECKING:
    from herald_client.client import AsyncHerald, Herald


class Customers:
    def __init__(self, client: Herald) -> None:
        self._run = client.run

    def put(self, customer_id: str, *, name: str | None = None) -> Customer:
        """Make the customer under your own id for it, or rename it (safe to repeat)."""
        return self._run(_calls.put_customer(customer_id, name))

    def get(self, customer_id: str) -> Customer:
        return self._run(_calls.get_customer(customer_id))

    def list(self, *, limit: int | None = None, cursor: str | None = None) -> Page[Customer]:
        return self._run(_calls.list_customers(limit=limit, cursor=cursor))

    def delete(self, customer_id: str) -> None:
        """The customer and its endpoints (their delivery history is kept)."""
        self._run(_calls.delete_customer(customer_id))


class AsyncCustomers:
    def __init__(self, client: AsyncHerald) -> None:
        self._run = client.run

    async def put(self, customer_id: str, *, name: str | None = None) -> Customer:
        return await self._run(_calls.put_customer(customer_id, name))

    async def get(self, customer_id: str) -> Customer:
        return await self._run(_calls.get_customer(customer_id))

    async def list(self, *, limit: int | None = None, cursor: str | None = None) -> Page[Customer]:
        return await self._run(_calls.list_customers(limit=limit, cursor=cursor))

    async def delete(self, customer_id: str) -> None:
        await self._run(_calls.delete_customer(customer_id))


class PortalSessions:
    def __init__(self, client: Herald) -> None:
        self._run = client.run

    def create(
        self,
        customer_id: str,
        *,
        capabilities: list[str] | None = None,
        lifetime_seconds: int | None = None,
    ) -> PortalSession:
        """A session for one customer's portal: ``url`` opens it once, in an iframe or a tab.
        ``capabilities``: manage_endpoints, replay, transform_endpoints, poll_endpoints
        (none: read-only)."""
        return self._run(
            _calls.create_portal_session(customer_id, capabilities or [], lifetime_seconds)
        )

    def list(
        self,
        *,
        customer_id: str | None = None,
        api_key_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[PortalSessionListed]:
        """Newest first, each with its status (unopened, open, ended, revoked): all of them,
        one customer's, or those one API key minted."""
        return self._run(
            _calls.list_portal_sessions(
                customer_id=customer_id, api_key_id=api_key_id, limit=limit, cursor=cursor
            )
        )

    def revoke(self, session_id: str) -> None:
        self._run(_calls.revoke_portal_session(session_id))

    def revoke_all(
        self, *, customer_id: str | None = None, api_key_id: str | None = None
    ) -> SessionsRevoked:
        """End now every running session of a customer, or minted by an API key, or both
        (those of that key for that customer); name at least one. ``revoked``: how many."""
        return self._run(
            _calls.revoke_portal_sessions(customer_id=customer_id, api_key_id=api_key_id)
        )


class AsyncPortalSessions:
    def __init__(self, client: AsyncHerald) -> None:
        self._run = client.run

    async def create(
        self,
        customer_id: str,
        *,
        capabilities: list[str] | None = None,
        lifetime_seconds: int | None = None,
    ) -> PortalSession:
        return await self._run(
            _calls.create_portal_session(customer_id, capabilities or [], lifetime_seconds)
        )

    async def list(
        self,
        *,
        customer_id: str | None = None,
        api_key_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[PortalSessionListed]:
        return await self._run(
            _calls.list_portal_sessions(
                customer_id=customer_id, api_key_id=api_key_id, limit=limit, cursor=cursor
            )
        )

    async def revoke(self, session_id: str) -> None:
        await self._run(_calls.revoke_portal_session(session_id))

    async def revoke_all(
        self, *, customer_id: str | None = None, api_key_id: str | None = None
    ) -> SessionsRevoked:
        return await self._run(
            _calls.revoke_portal_sessions(customer_id=customer_id, api_key_id=api_key_id)
        )
