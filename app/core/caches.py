"""A cache every tenant of a process uses, where each tenant has a share.

A plain bounded cache lets one tenant's many entries push out every other tenant's (or, as
Herald's caches once did, empty the whole cache when full): the others then pay the misses. Here
a tenant holds at most ``per_tenant`` entries -- past that, its own least recently used go --
and when all of them together reach ``total``, the tenant holding the most gives up its least
recently used. No tenant's entries are evicted for another's until that other holds fewer.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)
Value = TypeVar("Value")


class SharedCache(Generic[Key, Value]):
    def __init__(self, *, per_tenant: int, total: int, seconds: float | None = None) -> None:
        """``seconds``: how long an entry may be used (None: until evicted)."""
        self._per_tenant = per_tenant
        self._total = total
        self._seconds = seconds
        self._held: dict[str, OrderedDict[Key, tuple[float, Value]]] = {}
        self._owner: dict[Key, str] = {}  # whose share each key counts against

    def __len__(self) -> int:
        return len(self._owner)

    def held_by(self, tenant: str) -> int:
        return len(self._held.get(tenant, ()))

    def get(self, key: Key) -> Value | None:
        tenant = self._owner.get(key)
        if tenant is None:
            return None
        entries = self._held[tenant]
        until, value = entries[key]
        if until <= time.monotonic():
            self.forget(key)
            return None
        entries.move_to_end(key)
        return value

    def put(self, tenant: str, key: Key, value: Value) -> None:
        if self._seconds is not None and self._seconds <= 0:
            return
        until = float("inf") if self._seconds is None else time.monotonic() + self._seconds
        self.forget(key)
        if self.held_by(tenant) >= self._per_tenant:
            self._evict_from(tenant)
        elif len(self._owner) >= self._total:
            self._evict_from(max(self._held, key=lambda t: len(self._held[t])))
        self._held.setdefault(tenant, OrderedDict())[key] = (until, value)
        self._owner[key] = tenant

    def forget(self, key: Key) -> None:
        tenant = self._owner.pop(key, None)
        if tenant is not None:
            entries = self._held[tenant]
            del entries[key]
            if not entries:
                del self._held[tenant]

    def _evict_from(self, tenant: str) -> None:
        key = next(iter(self._held[tenant]))  # its least recently used
        self.forget(key)
