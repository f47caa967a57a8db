"""Reads from streaming replicas: which server a read goes to, and how old its answer may be.

A replica is used while it answers, is still a standby (one that was promoted no longer follows
the primary), and has replayed everything the primary had written ``max_lag`` seconds ago. A
probe decides that every ``probe_every`` seconds from WAL positions, not from timestamps: the
primary's position is sampled, and a replica that has replayed past a sample holds every
commit made before it. How old an answer may be is then the time since that sample -- an
upper bound, whether or not anything was written meanwhile.

A read that finds nothing on a replica is asked of the primary: a delivery accepted a moment
ago is never answered 404 because the replica has not replayed it yet. A replica that fails
mid-read is left out until a probe finds it well, and the read is answered by the primary.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import structlog
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.core import metrics
from app.core.db import (
    DATABASE_TROUBLE,
    create_engine,
    create_sessionmaker,
    is_transaction_conflict,
    is_transient,
)
from app.core.errors import NotFound

log = structlog.get_logger()

T = TypeVar("T")

# How long a probe, or a read's new connection, waits for a replica before it counts as
# unreachable: a replica that stopped answering costs a read this much before the primary is
# asked, not asyncpg's minute.
PROBE_TIMEOUT_SECONDS = 2.0
# How long a statement may take on a replica before the primary is asked instead: a replica cut
# off mid-read (no reset, no answer) costs a read this much, not the 30 s command timeout. Per
# statement, on the replica's connections only: what a read asks of Redis is not counted.
READ_TIMEOUT_SECONDS = 5.0
_UNREACHABLE: tuple[type[Exception], ...] = (*DATABASE_TROUBLE, TimeoutError)

# The primary's WAL position, and its timeline: the first 8 hex digits of its WAL file's name.
_PRIMARY_POSITION = text(
    "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint,"
    " ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int"
)
# A standby's replayed position, and the timeline it streams (NULL when it streams nothing, or
# when the role may not see pg_stat_wal_receiver's details: pg_read_all_stats).
_REPLICA_POSITION = text(
    "SELECT pg_is_in_recovery(), (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint,"
    " (SELECT received_tli FROM pg_stat_wal_receiver)"
)


@dataclass(frozen=True)
class Served(Generic[T]):
    """A read's answer, and how many seconds behind the primary it may be (None: read from the
    primary itself)."""

    value: T
    lag: float | None


@dataclass
class Replica:
    name: str  # "replica-0", ...: the order of the setting; never the URL, which holds a password
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    # A connection of the probe's own: a pool busy with reads must not make it time out, and
    # the replica look gone just when reads need it most.
    probe_engine: AsyncEngine
    # When (event loop clock) the primary had written no more than this replica has replayed,
    # as of the last probe: what it answers is at most that old.
    caught_up_at: float | None = None
    unusable: str | None = "not yet probed"  # why reads pass it by; None: it serves them
    # The timeline its WAL receiver streamed when last seen: a receiver that stopped (its
    # primary died in a failover) shows none, yet what it replayed is still that timeline's.
    timeline: int | None = None


@dataclass
class Reads:
    """Where the API's reads go: a usable replica in turn, else the primary."""

    primary: async_sessionmaker[AsyncSession]
    primary_probe: AsyncEngine | None  # None: no replicas, nothing to probe
    replicas: list[Replica]
    max_lag: float
    probe_every: float
    _positions: deque[tuple[float, int]] = field(default_factory=deque)
    _primary_answers: bool = True
    _timeline: int | None = None  # the primary's, as of its last answer
    _turn: itertools.count[int] = field(default_factory=itertools.count)
    _task: asyncio.Task[None] | None = None

    @classmethod
    def open(
        cls,
        primary: async_sessionmaker[AsyncSession],
        primary_url: str,
        replica_urls: Sequence[str],
        *,
        max_lag: float,
        probe_every: float,
        pool_size: int,
    ) -> Reads:
        """Engines for each replica (made now, connected when first used) and the probe's."""
        replicas = []
        for n, url in enumerate(replica_urls):
            engine = create_engine(
                url,
                pool_size=pool_size,
                connect_timeout=PROBE_TIMEOUT_SECONDS,
                command_timeout=READ_TIMEOUT_SECONDS,
            )
            probe = create_engine(url, pool_size=1, connect_timeout=PROBE_TIMEOUT_SECONDS)
            replicas.append(Replica(f"replica-{n}", engine, create_sessionmaker(engine), probe))
        primary_probe = create_engine(primary_url, pool_size=1) if replicas else None
        return cls(primary, primary_probe, replicas, max_lag, probe_every)

    def start(self) -> None:
        if self.replicas:
            self._task = asyncio.create_task(self._probe_forever(), name="replica-probe")

    async def close(self) -> None:
        try:
            if self._task is not None:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
        finally:
            for engine in self._engines():
                await engine.dispose()

    def _engines(self) -> list[AsyncEngine]:
        probes = [self.primary_probe] if self.primary_probe is not None else []
        return probes + [e for r in self.replicas for e in (r.engine, r.probe_engine)]

    async def run(self, read: Callable[[AsyncSession], Awaitable[T]]) -> Served[T]:
        """``read`` in a transaction of its own on a usable replica, or on the primary."""
        now = asyncio.get_running_loop().time()
        replica = self._choose(now)
        if replica is not None and replica.caught_up_at is not None:
            lag = now - replica.caught_up_at
            try:
                async with replica.sessionmaker() as session, session.begin():
                    return Served(await read(session), lag)
            except NotFound:
                pass  # not replayed yet, perhaps: only the primary may say it does not exist
            except _UNREACHABLE as exc:
                if is_transaction_conflict(exc):
                    pass  # replay cancelled the read (a recovery conflict): the replica is well
                elif isinstance(exc, TimeoutError):
                    # A hung replica, or a read slower than the bound (a big tenant's listing):
                    # the probe tells them apart, so one slow read never takes it from others.
                    pass
                elif is_transient(exc):
                    self._set(replica, None, unusable=f"failed a read: {type(exc).__name__}")
                else:
                    raise  # the read itself is wrong: the primary would say the same
        async with self.primary() as session, session.begin():
            return Served(await read(session), None)

    def _choose(self, now: float) -> Replica | None:
        # Within the bound now, not only at the last probe: a stalled probe does not stretch it.
        usable = [
            r
            for r in self.replicas
            if r.unusable is None
            and r.caught_up_at is not None
            and now - r.caught_up_at <= self.max_lag
        ]
        return usable[next(self._turn) % len(usable)] if usable else None

    async def _probe_forever(self) -> None:
        while True:
            try:
                await self.probe()
            except Exception as exc:  # a probe that failed must not end the probing
                log.error("replica.probe_failed", error=type(exc).__name__)
            await asyncio.sleep(self.probe_every)

    async def probe(self) -> None:
        """Sample the primary's WAL position, then judge each replica against the samples."""
        assert self.primary_probe is not None
        clock = asyncio.get_running_loop()
        # Taken before the question: a commit made while the answer travels back must not be
        # counted as one the replicas were compared against.
        asked_at = clock.time()
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_SECONDS):
                async with self.primary_probe.connect() as connection:
                    position, self._timeline = (await connection.execute(_PRIMARY_POSITION)).one()
        except _UNREACHABLE as exc:
            # The replicas are judged against the samples already taken, and pass the bound
            # as those age: reads then go to the primary, which answers them or not.
            position = None
            if self._primary_answers:
                log.warning("replica.primary_unreachable", error=type(exc).__name__)
            self._primary_answers = False
        else:
            if not self._primary_answers:
                log.info("replica.primary_answers")
            self._primary_answers = True
        if position is not None:
            self._positions.append((asked_at, int(position)))
            # Samples older than the bound cannot make a replica usable: keep one of them.
            while len(self._positions) > 1 and self._positions[1][0] < clock.time() - self.max_lag:
                self._positions.popleft()
        await asyncio.gather(*(self._judge(replica) for replica in self.replicas))

    async def _judge(self, replica: Replica) -> None:
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_SECONDS):
                async with replica.probe_engine.connect() as connection:
                    standby, replayed, timeline = (
                        await connection.execute(_REPLICA_POSITION)
                    ).one()
        except _UNREACHABLE as exc:
            self._set(replica, None, unusable=f"unreachable: {type(exc).__name__}")
            return
        if not standby:
            self._set(replica, None, unusable="promoted: it no longer follows the primary")
            return
        replica.timeline = timeline = timeline or replica.timeline
        if timeline is not None and self._timeline is not None and timeline != self._timeline:
            # Still streaming from a primary that was failed over: what it replays past the
            # fork is not the primary's, however close its position looks.
            self._set(
                replica, None, unusable=f"it follows timeline {timeline}, not {self._timeline}"
            )
            return
        if replayed is None:  # a standby restored from archive that streams nothing yet
            self._set(replica, None, unusable="it has replayed no WAL")
            return
        now = asyncio.get_running_loop().time()
        caught_up = max(
            (at for at, position in self._positions if position <= replayed), default=None
        )
        if caught_up is None or now - caught_up > self.max_lag:
            self._set(replica, caught_up, unusable=f"more than {self.max_lag:g} s behind")
        else:
            self._set(replica, caught_up, unusable=None)

    def _set(self, replica: Replica, caught_up_at: float | None, *, unusable: str | None) -> None:
        if unusable != replica.unusable:
            if unusable is None:
                log.info("replica.usable", replica=replica.name)
            else:
                log.warning("replica.unusable", replica=replica.name, reason=unusable)
        replica.caught_up_at, replica.unusable = caught_up_at, unusable
        metrics.REPLICA_USABLE.labels(replica=replica.name).set(unusable is None)
        if caught_up_at is not None:
            lag = asyncio.get_running_loop().time() - caught_up_at
            metrics.REPLICA_LAG.labels(replica=replica.name).set(lag)
