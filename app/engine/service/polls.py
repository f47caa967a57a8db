"""Polling endpoints: the receiver reads its deliveries instead of being sent them.

A poll is a claim like a worker's (delivery_leases.claim_batch, of a ``poll`` endpoint): each
delivery it reads is leased for the poll's visibility timeout and answered with the body and
headers a push would have sent -- signed the same way, with the same ``webhook-id`` -- and a
receipt, its id and lease token. An acknowledgement records each receipt as a success, fenced
by that token like any record (record_writes.write_batch), so an ordered stream hands on to its
next delivery then and only then. A delivery not acknowledged in time is claimable again, with
its id unchanged: a second reader gets it, and a late acknowledgement of the first read finds
its receipt expired.

A poll may wait for deliveries (a long poll): it claims again after pauses that grow to a
second, for at most ``WAIT_MAX_SECONDS``, while its client is there and its endpoint enabled;
each tenant has a share of the waiting polls of a process, and each of its customers a share of
that, past which a poll that found nothing is refused. A page holds at most ``PAGE_BYTES`` of
bodies: what a claim took beyond it is given back, unread.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.config import Settings
from app.core.db import single_statements
from app.core.ids import is_id
from app.core.scope import Scope
from app.core.sealing import KeyRing, OpenedSecrets
from app.core.states import DeliveryState, Outcome
from app.engine.repository import delivery_leases, polled_rows
from app.engine.repository.delivery_leases import ClaimedDelivery
from app.engine.repository.delivery_records import Finished, Recording
from app.engine.service import envelope, record_writes
from app.streams.service.heads import StreamKey

log = structlog.get_logger("herald.delivery")

PAGE_MAX = 500  # deliveries a poll reads at most
PAGE_BYTES = 8 * 1024 * 1024  # the bodies of a page, at most (past its first delivery)
WAIT_MAX_SECONDS = 20.0  # how long a poll may wait for deliveries, at most
VISIBILITY_MIN_SECONDS, VISIBILITY_MAX_SECONDS = 1.0, 3600.0
# Between a waiting poll's claims: doubled from the first to the last.
WAIT_FIRST_PAUSE_SECONDS, WAIT_LAST_PAUSE_SECONDS = 0.05, 1.0


@dataclass(frozen=True)
class PolledDelivery:
    """One delivery as a poll reads it: what a push would have sent, and its receipt."""

    id: str
    receipt: str  # "<id>.<lease token>": what acknowledges this read, and no other
    event_id: str
    event_type: str
    reads: int  # the reads so far, this one included
    visible_again_at: datetime  # when it comes back, unless acknowledged first
    body: str  # the bytes the signature covers, exactly
    headers: dict[str, str]


@dataclass(frozen=True)
class Acknowledged:
    acknowledged: list[str] = field(default_factory=list)  # ids: succeeded, now or before
    expired: list[str] = field(default_factory=list)  # ids whose receipt no longer holds


class PollRefused(Exception):
    """The tenant's (or its customer's) share of waiting polls in this process is taken."""


Gone = Callable[[], Awaitable[bool]]  # whether the poll's client has gone


class Polls:
    """This process's polls: the secrets they sign with, opened once, and each tenant's waits."""

    def __init__(
        self,
        settings: Settings,
        sessionmaker: async_sessionmaker[AsyncSession],
        keys: KeyRing,
        *,
        page_bytes: int = PAGE_BYTES,
    ) -> None:
        self._settings = settings
        self._page_bytes = page_bytes
        self._sessionmaker = sessionmaker
        self._opened = OpenedSecrets(keys)
        self._waiting: Counter[tuple[str, str | None]] = Counter()

    async def poll(
        self,
        scope: Scope,
        endpoint_id: str,
        *,
        limit: int,
        wait: float,
        visibility: float,
        gone: Gone | None = None,
    ) -> list[PolledDelivery]:
        """Up to ``limit`` deliveries, oldest due first, each hidden from other polls for
        ``visibility`` seconds; when there are none, waits up to ``wait`` seconds for some
        while the client is there (PollRefused when the scope's share of waiting polls is
        taken already)."""
        read, ended = await self._read(endpoint_id, limit, visibility)
        if read or ended or wait <= 0:
            return read
        with self._waiting_share(scope):
            clock = asyncio.get_running_loop()
            ends, pause = clock.time() + wait, WAIT_FIRST_PAUSE_SECONDS
            while not read and not ended and clock.time() < ends:
                await asyncio.sleep(min(pause, max(0.0, ends - clock.time())))
                pause = min(pause * 2, WAIT_LAST_PAUSE_SECONDS)
                if gone is not None and await gone():
                    return []  # nothing is leased to a client that has gone
                read, ended = await self._read(endpoint_id, limit, visibility)
        return read

    @contextlib.contextmanager
    def _waiting_share(self, scope: Scope) -> Iterator[None]:
        """One of the tenant's waiting polls, and of its customer's (a quarter of the
        tenant's): PollRefused past either."""
        tenant, customer = (scope.tenant_id, None), (scope.tenant_id, scope.customer_id)
        per_tenant = self._settings.poll_waits_per_tenant
        if self._waiting[tenant] >= per_tenant or (
            scope.customer_id is not None and self._waiting[customer] >= max(1, per_tenant // 4)
        ):
            raise PollRefused
        held = [tenant] if scope.customer_id is None else [tenant, customer]
        self._waiting.update(held)
        try:
            yield
        finally:
            self._waiting.subtract(held)
            for key in held:
                if not self._waiting[key]:
                    del self._waiting[key]

    async def _read(
        self, endpoint_id: str, limit: int, visibility: float
    ) -> tuple[list[PolledDelivery], bool]:
        """What a claim read, and whether the endpoint can be read no more (disabled or
        deleted meanwhile: what the claim took is given back, and a waiting poll ends)."""
        async with single_statements(self._sessionmaker) as connection:
            batch = await delivery_leases.claim_batch(
                connection,
                region=self._settings.region,
                endpoint_id=endpoint_id,
                limit=limit,
                lease_seconds=visibility,
                delivery="poll",
            )
        rows = batch.rows
        if any(row.endpoint_deleted or not row.endpoint_enabled for row in rows):
            await self._give_back(rows)
            return [], True
        now = datetime.now(UTC)
        read: list[PolledDelivery] = []
        unbuildable, size = [], 0
        for i, claimed in enumerate(rows):
            if read and size > self._page_bytes:
                await self._give_back(rows[i:])
                break
            try:
                read.append(self._polled(claimed, now))
                size += len(read[-1].body)
            except envelope.RequestNotBuilt as exc:
                log.warning(
                    "delivery.request_not_built",
                    reason=str(exc),
                    delivery_id=claimed.id,
                    endpoint_id=claimed.endpoint_id,
                )
                unbuildable.append((claimed, str(exc)))
        if unbuildable:
            await self._record_dead(unbuildable)
        return read, False

    async def _give_back(self, rows: Sequence[ClaimedDelivery]) -> None:
        """Unread, uncounted: as a worker gives back what it could not send."""
        async with single_statements(self._sessionmaker) as connection:
            await polled_rows.give_back(connection, [(r.id, r.token) for r in rows])

    def _polled(self, claimed: ClaimedDelivery, now: datetime) -> PolledDelivery:
        body = envelope.request_body(claimed)
        headers = envelope.request_headers(
            claimed, body, {}, self._opened, user_agent=self._settings.user_agent
        )
        return PolledDelivery(
            id=claimed.id,
            receipt=f"{claimed.id}.{claimed.token.hex}",
            event_id=claimed.event_id,
            event_type=claimed.event_type,
            reads=claimed.attempt_number,
            visible_again_at=now + timedelta(seconds=claimed.lease_left),
            body=body.decode(),
            headers=headers,
        )

    async def _record_dead(self, unbuildable: Sequence[tuple[ClaimedDelivery, str]]) -> None:
        """What cannot be read -- its endpoint's secret damaged -- dies at once, as a push that
        could not be built does: reading it again would fail again."""
        items = [
            (
                Recording(
                    claimed.id,
                    claimed.token,
                    Finished(DeliveryState.DEAD, None, why, claimed.attempt_number),
                ),
                _stream_of(claimed),
            )
            for claimed, why in unbuildable
        ]
        await record_writes.write_batch(self._sessionmaker, items)

    async def acknowledge(self, endpoint_id: str, receipts: Sequence[str]) -> Acknowledged:
        """Record each receipt's delivery as succeeded, the read its attempt -- fenced by the
        receipt's token, so only a read whose visibility has not ended acknowledges. One that
        had succeeded already is acknowledged again; any other is expired."""
        held = list(dict.fromkeys(filter(None, (_parsed(receipt) for receipt in receipts))))
        async with single_statements(self._sessionmaker) as connection:
            reads = await polled_rows.held_reads(connection, endpoint_id, held)
        now = datetime.now(UTC)
        items = [
            (
                Recording(
                    read.id,
                    read.token,
                    Finished(
                        DeliveryState.SUCCEEDED,
                        None,
                        None,
                        read.attempt_count,
                        outcome=Outcome.SUCCESS.value,
                        started_at=read.read_at,
                        duration_ms=max(0, int((now - read.read_at).total_seconds() * 1000)),
                    ),
                ),
                None if read.stream is None else StreamKey(endpoint_id, read.stream),
            )
            for read in reads
        ]
        written = await record_writes.write_batch(self._sessionmaker, items) if items else None
        recorded = written.recorded if written is not None else set()
        ids = list(dict.fromkeys(delivery_id for delivery_id, _ in held))
        rest = [delivery_id for delivery_id in ids if delivery_id not in recorded]
        async with single_statements(self._sessionmaker) as connection:
            before = await polled_rows.succeeded(connection, endpoint_id, rest)
        return Acknowledged(
            acknowledged=[i for i in ids if i in recorded or i in before],
            expired=[i for i in ids if i not in recorded and i not in before],
        )


def _stream_of(claimed: ClaimedDelivery) -> StreamKey | None:
    return None if claimed.stream is None else StreamKey(claimed.endpoint_id, claimed.stream)


def _parsed(receipt: str) -> tuple[str, uuid.UUID] | None:
    """A receipt's delivery id and lease token; None for what no poll answered (it matches
    nothing, and is reported expired by the caller's check of the shape)."""
    delivery_id, _, token = receipt.rpartition(".")
    if not is_id(delivery_id):
        return None
    try:
        return delivery_id, uuid.UUID(hex=token)
    except ValueError:
        return None
