"""Payloads checked against their event type's schema at accept, before anything is stored.

Each API process keeps each (tenant, event type)'s compiled schema -- or that it has none --
for ``HERALD_EVENT_TYPE_CACHE_SECONDS``: the accept path pays a catalogue read only when that
has run out, and a schema change reaches every process within that time (this one at once).
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app import json_schemas
from app.catalogue.repository import event_types
from app.errors import Unprocessable

_Entry = tuple[float, Any, int]  # (valid until, validator or None, schema version)


class PayloadSchemas:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        seconds: float,
        max_entries: int = 10_000,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._seconds = seconds
        self._max_entries = max_entries
        self._entries: dict[tuple[str, str], _Entry] = {}

    async def refusal(
        self, tenant_id: str, event_type: str, payload: dict[str, Any]
    ) -> Unprocessable | None:
        """Why the payload does not match its type's schema, or None (it does, or the type has
        no schema). Returned rather than raised: a batch reports it per item."""
        validator, version = await self._schema_of(tenant_id, event_type)
        if validator is None:
            return None
        wrong = json_schemas.violation(validator, payload)
        if wrong is None:
            return None
        return Unprocessable(
            f"payload does not match the schema of event type {event_type} "
            f"(version {version}): {wrong}"
        )

    async def check(self, tenant_id: str, event_type: str, payload: dict[str, Any]) -> None:
        refused = await self.refusal(tenant_id, event_type, payload)
        if refused is not None:
            raise refused

    def forget(self, tenant_id: str, event_type: str) -> None:
        self._entries.pop((tenant_id, event_type), None)

    async def _schema_of(self, tenant_id: str, event_type: str) -> tuple[Any, int]:
        key = (tenant_id, event_type)
        entry = self._entries.get(key)
        if entry is not None and entry[0] > time.monotonic():
            return entry[1], entry[2]
        async with self._sessionmaker() as session:
            row = await event_types.get(session, tenant_id, event_type)
        validator = None
        if row is not None and row.schema is not None:
            # Saved schemas compiled when saved; one that no longer compiles (a library
            # upgrade) checks nothing rather than refusing every payload of its type.
            try:
                validator = json_schemas.compile_schema(row.schema)
            except json_schemas.SchemaError:
                validator = None
        version = row.version if row is not None else 0
        if self._seconds > 0:
            if len(self._entries) >= self._max_entries:
                self._entries.clear()
            self._entries[key] = (time.monotonic() + self._seconds, validator, version)
        return validator, version
