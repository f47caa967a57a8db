"""Payloads checked against their event type's schema at accept, before anything is stored.

Each API process keeps each (tenant, event type)'s compiled schema -- or that it has none --
for ``HERALD_EVENT_TYPE_CACHE_SECONDS``: the accept path pays a catalogue read only when that
has run out, and a schema change reaches every process within that time (this one at once).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.catalogue.repository import event_types
from app.core.caches import SharedCache
from app.core.errors import Unprocessable
from app.models import EventTypeDef
from app.programs.payload_schema_violations import first_violation
from app.programs.payload_schemas import (
    CompiledSchema,
    OverBudget,
    SchemaError,
    compile_schema,
    conforms,
)

_Entry = tuple[CompiledSchema | None, int]  # (schema or None, version)


def _mismatch(
    schema: CompiledSchema, of: str, payload: dict[str, Any], payload_bytes: int
) -> Unprocessable | None:
    try:
        if conforms(schema, payload, payload_bytes):
            return None
    except OverBudget as over:
        return Unprocessable(
            f"payload is too large to be checked against {of}: checking its "
            f"{payload_bytes:,} bytes could take {over.steps:,} steps, over the budget of a "
            "check (send less, or simplify the schema)"
        )
    return Unprocessable(
        f"payload does not match {of}: {first_violation(schema, payload, payload_bytes)}"
    )


def example_refusal(row: EventTypeDef) -> Unprocessable | None:
    """Why the entry's example does not match its own schema, or None."""
    if row.example is None or row.schema is None:
        return None
    schema = compile_schema(row.schema)  # saved schemas compile (checked when saved)
    size = len(json.dumps(row.example, separators=(",", ":")).encode())
    refused = _mismatch(schema, f"event type {row.name}'s schema", row.example, size)
    if refused is None:
        return None
    return Unprocessable(f"the example {refused}")


class PayloadSchemas:
    """Each tenant has a share of the cache (app/core/caches.py): a batch of a thousand event
    types pushes out its own tenant's schemas, never another's."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        seconds: float,
        per_tenant: int = 1_000,
        total: int = 20_000,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._entries: SharedCache[tuple[str, str], _Entry] = SharedCache(
            per_tenant=per_tenant, total=total, seconds=seconds
        )

    async def refusal(
        self, tenant_id: str, event_type: str, payload: dict[str, Any], payload_bytes: int
    ) -> Unprocessable | None:
        """Why the payload does not match its type's schema, or None (it does, or the type has
        no schema). Returned rather than raised: a batch reports it per item. A payload whose
        check could cost more than a check may (app/programs/budget.py) is refused unchecked:
        the schema is the tenant's, so is the refusal."""
        schema, version = await self._schema_of(tenant_id, event_type)
        if schema is None:
            return None
        return _mismatch(
            schema,
            f"the schema of event type {event_type} (version {version})",
            payload,
            payload_bytes,
        )

    async def check(
        self, tenant_id: str, event_type: str, payload: dict[str, Any], payload_bytes: int
    ) -> None:
        refused = await self.refusal(tenant_id, event_type, payload, payload_bytes)
        if refused is not None:
            raise refused

    def forget(self, tenant_id: str, event_type: str) -> None:
        self._entries.forget((tenant_id, event_type))

    async def _schema_of(
        self, tenant_id: str, event_type: str
    ) -> tuple[CompiledSchema | None, int]:
        key = (tenant_id, event_type)
        entry = self._entries.get(key)
        if entry is not None:
            return entry
        async with self._sessionmaker() as session:
            row = await event_types.get(session, tenant_id, event_type)
        return self._keep(tenant_id, event_type, row)

    async def prefetch(self, tenant_id: str, types: Collection[str]) -> None:
        """The schemas of every type named, read in one query where this process has not got
        them: a batch of a thousand types costs one catalogue read, not a thousand."""
        wanted = {t for t in types if self._entries.get((tenant_id, t)) is None}
        if not wanted:
            return
        async with self._sessionmaker() as session:
            rows = {row.name: row for row in await event_types.get_many(session, tenant_id, wanted)}
        for event_type in wanted:
            self._keep(tenant_id, event_type, rows.get(event_type))

    def _keep(
        self, tenant_id: str, event_type: str, row: EventTypeDef | None
    ) -> tuple[CompiledSchema | None, int]:
        compiled = None
        if row is not None and row.schema is not None:
            # Saved schemas compiled when saved; one that no longer compiles (a library
            # upgrade, or rules tightened since) checks nothing rather than refusing every
            # payload of its type.
            try:
                compiled = compile_schema(row.schema)
            except SchemaError:
                compiled = None
        version = row.version if row is not None else 0
        self._entries.put(tenant_id, (tenant_id, event_type), (compiled, version))
        return compiled, version
