"""``Herald`` (sync) and ``AsyncHerald``: the same calls (``_calls``), run by httpx, and the
resources each holds (deliveries.py, events.py, endpoints.py, customers.py, limits.py)."""

from __future__ import annotations

import asyncio
import time
from typing import TypeVar

import httpx

from herald_client._calls import Call
from herald_client._transport import answer, headers_for, key_for, next_wait
from herald_client.customers import (
    AsyncCustomers,
    AsyncPortalSessions,
    Customers,
    PortalSessions,
)
from herald_client.deliveries import AsyncDeliveries, Deliveries
from herald_client.endpoints import AsyncEndpoints, Endpoints
from herald_client.events import AsyncEvents, Events
from herald_client.limits import AsyncOwnLimits, AsyncTenants, OwnLimits, Tenants

T = TypeVar("T")


class _Settings:
    def __init__(self, api_key: str, max_retries: int, max_retry_wait: float) -> None:
        self.api_key = api_key
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait


class Herald:
    """A Herald API client. ``max_retries`` bounds the retries of a repeatable call on 429,
    503 or a lost connection; each waits what ``Retry-After`` says, at most ``max_retry_wait``."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 10.0,
        max_retries: int = 4,
        max_retry_wait: float = 60.0,
        http: httpx.Client | None = None,
    ) -> None:
        self._http = http or httpx.Client(base_url=base_url, timeout=timeout)
        self._settings = _Settings(api_key, max_retries, max_retry_wait)
        self.deliveries = Deliveries(self)
        self.events = Events(self)
        self.endpoints = Endpoints(self)
        self.customers = Customers(self)
        self.portal_sessions = PortalSessions(self)
        self.limits = OwnLimits(self)
        self.tenants = Tenants(self)  # admin keys only

    def run(self, call: Call[T]) -> T:
        s, key = self._settings, key_for(call)
        attempt = 0
        while True:
            response: httpx.Response | None
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    json=call.json,
                    params=call.params or None,
                    headers=headers_for(call, s.api_key, key),
                    timeout=httpx.USE_CLIENT_DEFAULT if call.timeout is None else call.timeout,
                )
            except httpx.TransportError:
                response = None
                wait = next_wait(call, None, attempt, s.max_retries, s.max_retry_wait)
                if wait is None:
                    raise
            else:
                wait = next_wait(call, response, attempt, s.max_retries, s.max_retry_wait)
                if wait is None:
                    return answer(call, response)
            time.sleep(wait)
            attempt += 1

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Herald:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class AsyncHerald:
    """``Herald`` for asyncio: the same calls, awaited."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 10.0,
        max_retries: int = 4,
        max_retry_wait: float = 60.0,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self._http = http or httpx.AsyncClient(base_url=base_url, timeout=timeout)
        self._settings = _Settings(api_key, max_retries, max_retry_wait)
        self.deliveries = AsyncDeliveries(self)
        self.events = AsyncEvents(self)
        self.endpoints = AsyncEndpoints(self)
        self.customers = AsyncCustomers(self)
        self.portal_sessions = AsyncPortalSessions(self)
        self.limits = AsyncOwnLimits(self)
        self.tenants = AsyncTenants(self)  # admin keys only

    async def run(self, call: Call[T]) -> T:
        s, key = self._settings, key_for(call)
        attempt = 0
        while True:
            response: httpx.Response | None
            try:
                response = await self._http.request(
                    call.method,
                    call.path,
                    json=call.json,
                    params=call.params or None,
                    headers=headers_for(call, s.api_key, key),
                    timeout=httpx.USE_CLIENT_DEFAULT if call.timeout is None else call.timeout,
                )
            except httpx.TransportError:
                response = None
                wait = next_wait(call, None, attempt, s.max_retries, s.max_retry_wait)
                if wait is None:
                    raise
            else:
                wait = next_wait(call, response, attempt, s.max_retries, s.max_retry_wait)
                if wait is None:
                    return answer(call, response)
            await asyncio.sleep(wait)
            attempt += 1

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncHerald:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()
