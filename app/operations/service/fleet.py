"""Fleet-wide gauges from PostgreSQL, for `/metrics`: cheap indexed queries, cached briefly."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Row, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.redis_clients import FlowRedis, ping
from app.core.replicas import Reads

# Each query is served by a partial index and touches only live, or dead, rows: never the
# succeeded history; the live rows are read once for all their gauges. Each states what the
# table's checks make its state imply (live: `completed_at IS NULL`, dead: `dead_reason IS NOT
# NULL`), so the planner can take the indexes of migration 0009 (ix_deliveries_live,
# _dead_since). The relay's lag is the oldest outbox wake-up's age, read by its age index.
REDIS_PING_SECONDS = 1.0

# {t}: nothing for the fleet, or one tenant's condition (the console shows a tenant its own);
# {st}: the same for streams, which belong to the tenant's endpoints.
_SNAPSHOT = """
    WITH polled AS (
      -- Polling endpoints: their deliveries wait for their receiver by design, and a read
      -- its receiver did not acknowledge in time is no worker's death.
      SELECT id FROM endpoints WHERE deleted_at IS NULL AND delivery = 'poll' {t}
    ), held AS (
      -- Destinations waiting by policy (paused, disabled, breaker open): work due there is
      -- not late, and an alert on its age would page for a pause someone chose.
      SELECT id FROM endpoints
       WHERE deleted_at IS NULL AND (NOT enabled OR paused_until > now() OR breaker_trips > 0) {t}
      UNION ALL SELECT id FROM polled
    )
    SELECT live.*,
      (SELECT extract(epoch FROM now() - min(created_at)) FROM outbox_wakeups
        WHERE region = :r) AS relay_lag,
      (SELECT extract(epoch FROM now() - min(created_at)) FROM operational_signals
        WHERE true {t}) AS signal_lag,
      (SELECT count(*) FROM deliveries
        WHERE region = :r AND state = 'dead' AND dead_reason IS NOT NULL {t}) AS dead,
      (SELECT count(*) FROM endpoints WHERE deleted_at IS NULL AND paused_until > now() {t})
        AS paused,
      (SELECT count(*) FROM endpoints WHERE deleted_at IS NULL AND NOT enabled {t}) AS disabled,
      (SELECT count(*) FROM endpoints WHERE deleted_at IS NULL AND breaker_trips > 0 {t})
        AS breaker_open,
      (SELECT count(*) FROM streams WHERE halted_at IS NOT NULL {st}) AS streams_halted,
      (SELECT extract(epoch FROM now() - min(head_since)) FROM streams
        WHERE head_id IS NOT NULL {st}) AS oldest_head,
      (SELECT extract(epoch FROM now() - finished_at) FROM reconcile_runs
        WHERE region = :r AND status = 'succeeded' ORDER BY id DESC LIMIT 1) AS reconcile_age
    FROM (
      -- Every live row read once (a gauge each was a pass each over them).
      SELECT
        extract(epoch FROM now() - min(next_attempt_at) FILTER (WHERE state = 'pending'
          AND next_attempt_at <= now() AND endpoint_id <> ALL (ARRAY(SELECT id FROM held))))
          AS oldest_due,
        extract(epoch FROM now() - min(next_attempt_at) FILTER (WHERE state = 'enqueued'
          AND next_attempt_at <= now() AND endpoint_id <> ALL (ARRAY(SELECT id FROM held))))
          AS oldest_enqueued,
        count(*) FILTER (WHERE state = 'pending') AS pending,
        count(*) FILTER (WHERE state = 'enqueued') AS enqueued,
        count(*) FILTER (WHERE state = 'leased') AS leased,
        count(*) FILTER (WHERE state = 'leased' AND lease_until < now()
          AND endpoint_id <> ALL (ARRAY(SELECT id FROM polled))) AS expired_leases,
        count(*) FILTER (WHERE stream IS NOT NULL AND next_attempt_at IS NULL) AS behind_heads
      FROM deliveries WHERE region = :r AND completed_at IS NULL {t}
    ) AS live
    """
_FLEET_SQL = text(_SNAPSHOT.format(t="", st=""))
_TENANT_SQL = text(
    _SNAPSHOT.format(
        t="AND tenant_id = :t",
        st="AND endpoint_id IN (SELECT id FROM endpoints WHERE tenant_id = :t)",
    )
)


@dataclass(frozen=True)
class FleetSnapshot:
    region: str
    oldest_due: float
    oldest_enqueued: float
    relay_lag: float
    by_state: dict[str, int]
    expired_leases: int
    endpoints_paused: int
    endpoints_disabled: int
    endpoints_breaker_open: int
    reconcile_age: float  # +Inf: no reconcile run of the region ever succeeded
    redis_up: bool
    # Ordered delivery: streams halted behind a dead head, the oldest head's age (0: none),
    # and the deliveries waiting behind their streams' heads.
    streams_halted: int = 0
    oldest_stream_head: float = 0.0
    behind_stream_heads: int = 0
    # The oldest operational signal not yet made an event (0: none): the workers' relay of
    # them is stopped when this grows.
    signal_lag: float = 0.0


class _SnapshotCollector(Collector):
    def __init__(self, snapshot: FleetSnapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        s, region = self._snapshot, [self._snapshot.region]
        for name, doc, value in (
            (
                "herald_oldest_due_age_seconds",
                "How long the longest-waiting due pending delivery (not yet attempted, or "
                "redriven) has been due (0: none)",
                s.oldest_due,
            ),
            (
                "herald_oldest_enqueued_age_seconds",
                "How long the longest-waiting due enqueued delivery (a retry) has been due "
                "(0: none)",
                s.oldest_enqueued,
            ),
            (
                "herald_outbox_relay_lag_seconds",
                "Age of the oldest unpublished outbox row (0: none)",
                s.relay_lag,
            ),
            (
                "herald_operational_signal_lag_seconds",
                "Age of the oldest operational signal not yet made an operational event (0: none)",
                s.signal_lag,
            ),
            ("herald_expired_leases", "Leased deliveries whose lease expired", s.expired_leases),
            (
                "herald_streams_halted",
                "Ordered streams halted behind a dead head, waiting for an operator's redrive "
                "or skip",
                s.streams_halted,
            ),
            (
                "herald_stream_oldest_head_age_seconds",
                "How long the longest-standing head of an ordered stream has been its head "
                "(0: none)",
                s.oldest_stream_head,
            ),
            (
                "herald_stream_waiting_deliveries",
                "Ordered deliveries waiting behind their stream's head (the streams' depth)",
                s.behind_stream_heads,
            ),
            (
                "herald_reconcile_last_success_age_seconds",
                "Seconds since the region's last successful reconcile run (+Inf: none ever): "
                "the cron that calls POST /v1/reconcile is missing when this grows",
                s.reconcile_age,
            ),
        ):
            gauge = GaugeMetricFamily(name, doc, labels=["region"])
            gauge.add_metric(region, value)
            yield gauge
        states = GaugeMetricFamily(
            "herald_deliveries",
            "Deliveries by state (succeeded and cancelled: not counted, see herald_cancellations)",
            labels=["region", "state"],
        )
        for state, count in s.by_state.items():
            states.add_metric([s.region, state], count)
        yield states
        endpoints = GaugeMetricFamily(
            "herald_endpoints",
            "Endpoints paused, disabled, or with their circuit breaker open",
            labels=["condition"],
        )
        endpoints.add_metric(["paused"], s.endpoints_paused)
        endpoints.add_metric(["disabled"], s.endpoints_disabled)
        endpoints.add_metric(["breaker_open"], s.endpoints_breaker_open)
        yield endpoints
        redis = GaugeMetricFamily(
            "herald_redis_up", "1 when this API process reached Redis at the scrape, else 0"
        )
        redis.add_metric([], 1.0 if s.redis_up else 0.0)
        yield redis


class FleetGauges:
    def __init__(
        self,
        reads: Reads,
        redis: FlowRedis,
        region: str,
        ttl: float = 5.0,
    ) -> None:
        self._reads = reads  # a replica's figures are at most its bound behind
        self._redis = redis
        self._region = region
        self._ttl = ttl
        self._cached: tuple[float, bytes] | None = None

    async def render(self) -> bytes:
        """The gauges in Prometheus's text format (cached for the TTL)."""
        if self._cached is not None and self._cached[0] > time.monotonic():
            return self._cached[1]
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_SnapshotCollector(await self.snapshot()))
        body = generate_latest(registry)
        self._cached = (time.monotonic() + self._ttl, body)
        return body

    async def snapshot(self, tenant_id: str | None = None) -> FleetSnapshot:
        """The fleet's figures now; with ``tenant_id``, the delivery and endpoint counts are
        that tenant's (the lag and reconcile figures stay the region's)."""
        sql, params = (_FLEET_SQL, {"r": self._region})
        if tenant_id is not None:
            sql, params = _TENANT_SQL, {"r": self._region, "t": tenant_id}

        async def figures(session: AsyncSession) -> Row[Any]:
            return (await session.execute(sql, params)).one()

        row = (await self._reads.run(figures)).value
        return FleetSnapshot(
            region=self._region,
            oldest_due=float(row.oldest_due or 0),
            oldest_enqueued=float(row.oldest_enqueued or 0),
            relay_lag=float(row.relay_lag or 0),
            signal_lag=float(row.signal_lag or 0),
            by_state={
                "pending": row.pending,
                "enqueued": row.enqueued,
                "leased": row.leased,
                "dead": row.dead,
            },
            expired_leases=row.expired_leases,
            endpoints_paused=row.paused,
            endpoints_disabled=row.disabled,
            endpoints_breaker_open=row.breaker_open,
            redis_up=await self._redis_answers(),
            streams_halted=row.streams_halted,
            oldest_stream_head=float(row.oldest_head or 0),
            behind_stream_heads=row.behind_heads,
            reconcile_age=math.inf if row.reconcile_age is None else float(row.reconcile_age),
        )

    async def _redis_answers(self) -> bool:
        try:
            await asyncio.wait_for(ping(self._redis), REDIS_PING_SECONDS)
        except Exception:  # unreachable, or too slow to count as up: either way 0
            return False
        return True
