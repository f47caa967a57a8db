"""Accepting up to a thousand intents at once: one transaction, a handful of statements.

Each item stands alone: a bad item (invalid, unknown or disabled endpoint, too large, key
reused for something else) is reported with its problem and written nowhere, while the good
items commit together. Items with an idempotency key that was already used for the same intent
replay the original delivery.

A batch shares its API process's event loop with every other tenant's requests, so no step
takes the loop for a thousand items at once: each works through CHUNK items, then lets what
else is waiting run. (Shared CPU stays shared; what a tenant may have of it is its accept rate.)
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import TypeAdapter, ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.catalogue.service.payload_schemas import PayloadSchemas
from app.core.config import Settings
from app.core.errors import (
    HeraldError,
    IdempotencyMismatch,
    Unprocessable,
    problem_body,
)
from app.core.ids import new_id, sibling_id
from app.core.scope import Scope
from app.delivery.repository import deliveries, idempotency_keys, intents
from app.delivery.repository.idempotency_keys import KeyClaim
from app.delivery.schemas import (
    BatchCounts,
    BatchItem,
    BatchItemResult,
    DeliveryIntent,
    DeliveryOut,
)
from app.delivery.service.intake import encode_payload, request_fingerprint
from app.endpoints.service import endpoints
from app.endpoints.service.endpoints import refusal_for
from app.outbox.service.outbox import PendingPublication

ROUTE = "POST /v1/deliveries"  # a batch item replays (and is replayed by) the single route
# A thousand items are 4-7 ms of the API's loop at each step (validating, encoding, reading the
# inserted rows, answering); another tenant's accept waits that long at each of its own steps
# that comes behind one. A hundred keep each wait under a millisecond.
CHUNK = 100


@dataclass
class ItemOutcome:
    index: int
    status: int  # 202 accepted, 200 replayed, or the problem's status
    # A replay's delivery as read back, or a new one as inserted (its row: the response
    # validates a thousand of them in one call, not one model each).
    delivery: DeliveryOut | dict[str, Any] | None = None
    error: HeraldError | None = None


@dataclass
class _Candidate:
    index: int
    intent: DeliveryIntent
    key: str | None
    payload: bytes
    event_id: str


_ITEMS = TypeAdapter(list[BatchItem])


async def _validate(items: list[dict[str, Any]]) -> list[BatchItem | ItemOutcome]:
    """Every item as a BatchItem, or the outcome that says why it is not one.

    A chunk at a time in one call into pydantic's core rather than one per item; only a chunk
    with a bad item is gone through again item by item, to judge each on its own."""
    valid: list[BatchItem | ItemOutcome] = []
    for start in range(0, len(items), CHUNK):
        chunk = items[start : start + CHUNK]
        try:
            valid.extend(_ITEMS.validate_python(chunk))
        except ValidationError:
            valid.extend(_validate_one(start + n, raw) for n, raw in enumerate(chunk))
        await asyncio.sleep(0)
    return valid


def _validate_one(index: int, raw: dict[str, Any]) -> BatchItem | ItemOutcome:
    try:
        return BatchItem.model_validate(raw)
    except ValidationError as exc:
        detail = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_input=False)
        )
        return ItemOutcome(index, 422, error=Unprocessable(detail))


def _candidate(index: int, item: BatchItem, limit: int) -> _Candidate | ItemOutcome:
    try:
        payload = encode_payload(item.payload, limit)
    except HeraldError as exc:
        return ItemOutcome(index, exc.status, error=exc)
    return _Candidate(index, item, item.idempotency_key, payload, new_id("evt"))


async def accept_batch(
    session: AsyncSession,
    settings: Settings,
    tenant_id: str,
    items: list[dict[str, Any]],
    payload_schemas: PayloadSchemas,
    traceparent: str | None = None,
) -> tuple[list[ItemOutcome], list[PendingPublication]]:
    outcomes: dict[int, ItemOutcome] = {}
    candidates: list[_Candidate] = []
    seen_keys: set[str] = set()
    for index, item in enumerate(await _validate(items)):
        if index % CHUNK == CHUNK - 1:
            await asyncio.sleep(0)  # other tenants' requests between a batch's items
        parsed = (
            item
            if isinstance(item, ItemOutcome)
            else _candidate(index, item, settings.max_payload_bytes)
        )
        if isinstance(parsed, ItemOutcome):
            outcomes[index] = parsed
        elif parsed.key is not None and parsed.key in seen_keys:
            outcomes[index] = ItemOutcome(
                index, 422, error=Unprocessable("this idempotency_key appears twice in the batch")
            )
        else:
            seen_keys.update([parsed.key] if parsed.key else [])
            candidates.append(parsed)

    candidates = await _settle_keys(session, settings, tenant_id, candidates, outcomes)
    live = await endpoints.get_live_many(
        session, Scope(tenant_id), {c.intent.endpoint_id for c in candidates}
    )
    await payload_schemas.prefetch(tenant_id, {c.intent.event_type for c in candidates})
    accepted: list[_Candidate] = []
    for n, candidate in enumerate(candidates):
        if n % CHUNK == CHUNK - 1:
            await asyncio.sleep(0)
        endpoint_id = candidate.intent.endpoint_id
        refused = refusal_for(endpoint_id, live.get(endpoint_id)) or await payload_schemas.refusal(
            tenant_id, candidate.intent.event_type, candidate.intent.payload, len(candidate.payload)
        )
        if refused is not None:
            outcomes[candidate.index] = ItemOutcome(candidate.index, refused.status, error=refused)
        else:
            accepted.append(candidate)
    if len(accepted) < len(candidates):
        # Keys claimed for items that then failed must not stay claimed: release them.
        kept = {c.index for c in accepted}
        failed_keys = [c.key for c in candidates if c.key and c.index not in kept]
        await idempotency_keys.release_many(session, tenant_id=tenant_id, keys=failed_keys)
    inserted, wakeups = await _insert(session, settings, tenant_id, accepted, traceparent)
    for candidate, row in inserted:
        outcomes[candidate.index] = ItemOutcome(candidate.index, 202, delivery=row)
    publications = [
        PendingPublication(outbox_id, tenant_id, endpoint_id, run_at)
        for outbox_id, endpoint_id, run_at in wakeups
    ]
    return [outcomes[i] for i in range(len(items))], publications


async def _settle_keys(
    session: AsyncSession,
    settings: Settings,
    tenant_id: str,
    candidates: list[_Candidate],
    outcomes: dict[int, ItemOutcome],
) -> list[_Candidate]:
    """Claim every item's key at once; items whose key was used before replay or fail."""
    claims = [
        KeyClaim(c.key, request_fingerprint(ROUTE, c.intent, c.payload), c.event_id)
        for c in candidates
        if c.key is not None
    ]
    earlier = await idempotency_keys.claim_many(
        session,
        tenant_id=tenant_id,
        claims=claims,
        ttl=timedelta(hours=settings.idempotency_key_ttl_hours),
    )
    if not earlier:
        return candidates
    fingerprints = {claim.key: claim.request_hash for claim in claims}
    remaining = []
    for candidate in candidates:
        stored = earlier.get(candidate.key) if candidate.key else None
        if stored is None:
            remaining.append(candidate)
        elif stored.request_hash != fingerprints[candidate.key or ""]:
            error = IdempotencyMismatch("this idempotency_key was used for a different request")
            outcomes[candidate.index] = ItemOutcome(candidate.index, error.status, error=error)
        else:
            [original] = await deliveries.list_for_event(
                session, tenant_id, stored.resource_id, replayed=True
            )
            outcomes[candidate.index] = ItemOutcome(
                candidate.index, 200, delivery=DeliveryOut.model_validate(original)
            )
    return remaining


async def _insert(
    session: AsyncSession,
    settings: Settings,
    tenant_id: str,
    accepted: list[_Candidate],
    traceparent: str | None,
) -> tuple[list[tuple[_Candidate, dict[str, Any]]], list[tuple[int, str, datetime]]]:
    """Each accepted item with its delivery as inserted; and the wake-ups written for them."""
    new = []
    for n, c in enumerate(accepted):
        if n % CHUNK == CHUNK - 1:
            await asyncio.sleep(0)
        new.append(
            intents.NewIntent(
                event_id=c.event_id,
                event_type=c.intent.event_type,
                payload=c.payload,
                delivery_id=sibling_id("dlv", c.event_id),
                endpoint_id=c.intent.endpoint_id,
                deliver_after=c.intent.deliver_after,
                ordering_key=c.intent.ordering_key,
            )
        )
    inserted = await intents.insert_many(
        session,
        tenant_id=tenant_id,
        region=settings.region,
        intents=new,
        traceparent=traceparent,
        chunk=CHUNK,
    )
    rows = inserted.deliveries
    pairs = [(c, rows[n.delivery_id]) for c, n in zip(accepted, new, strict=True)]
    return pairs, inserted.wakeups


_RESULTS = TypeAdapter(list[BatchItemResult])


async def answer(outcomes: list[ItemOutcome]) -> bytes:
    """The batch's answer (BatchAccepted) as JSON, validated and written a chunk at a time."""
    parts = []
    for start in range(0, len(outcomes), CHUNK):
        results = _RESULTS.validate_python(
            [
                {
                    "index": o.index,
                    "status": o.status,
                    "delivery": o.delivery,
                    "error": problem_body(o.error) if o.error else None,
                }
                for o in outcomes[start : start + CHUNK]
            ]
        )
        parts.append(_RESULTS.dump_json(results)[1:-1])  # the items, without the list's brackets
        await asyncio.sleep(0)
    counts = BatchCounts(
        accepted=sum(o.status == 202 for o in outcomes),
        replayed=sum(o.status == 200 for o in outcomes),
        failed=sum(o.status >= 400 for o in outcomes),
    )
    return counts.model_dump_json()[:-1].encode() + b',"items":[' + b",".join(parts) + b"]}"
