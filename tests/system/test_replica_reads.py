"""Reads from a real streaming standby (``pg_basebackup -R``): served by it while it keeps up,
never a stale 404, and moved to the primary -- without an error -- when its replay is paused
past the bound, when it stops, and when it is promoted."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from subprocess import CalledProcessError

import asyncpg
import httpx
import pytest
from structlog.testing import capture_logs

from app.core.config import Settings
from app.core.ids import new_id
from app.core.replicas import Reads
from app.main import create_app
from tests.fixtures.api import new_endpoint, new_tenant, post_deliveries
from tests.fixtures.stack import ADMIN, OwnPostgres, Stack, client_for, plain_dsn
from tests.fixtures.standby import Standby

LAG = "Herald-Read-Lag"


@pytest.fixture
async def standby(own_postgres: OwnPostgres, tmp_path: Path) -> AsyncIterator[Standby]:
    replica = await asyncio.to_thread(
        Standby.from_primary, own_postgres.stack.database_url, tmp_path / "standby"
    )
    try:
        yield replica
    finally:
        with suppress(CalledProcessError):  # a test may have stopped it already
            await asyncio.to_thread(replica.stop)
        shutil.rmtree(replica.socket_dir, ignore_errors=True)


@asynccontextmanager
async def api_reading_from(
    settings: Settings, own: OwnPostgres, standby: Standby, *, max_lag: float
) -> AsyncIterator[tuple[httpx.AsyncClient, Reads]]:
    app = create_app(
        settings.model_copy(
            update={
                "database_url": own.stack.database_url,
                "database_replica_urls": (standby.url,),
                "replica_max_lag_seconds": max_lag,
                "replica_probe_seconds": 0.1,
            }
        )
    )
    async with app.router.lifespan_context(app), client_for(app) as client:
        yield client, app.state.resources.reads


async def until(condition: Callable[[], bool], *, limit: float = 60) -> None:
    """Poll ``condition()`` until it is true: the probe runs on its own schedule."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, "the replica's state never changed"
        await asyncio.sleep(0.05)


async def listed(client: httpx.AsyncClient, tenant: dict[str, str]) -> httpx.Response:
    response = await client.get("/v1/deliveries", headers=tenant)
    assert response.status_code == 200, response.text
    return response


async def until_read_from_the_replica(client: httpx.AsyncClient, tenant: dict[str, str]) -> None:
    """Until a listing is answered by the replica: usable at the last probe is not yet within
    the bound at the next read on a loaded machine."""
    deadline = time.monotonic() + 60
    while LAG not in (await listed(client, tenant)).headers:
        assert time.monotonic() < deadline, "no listing was ever read from the replica"
        await asyncio.sleep(0.05)


async def test_a_replica_serves_reads_that_say_how_old_and_never_a_stale_404(
    settings: Settings, own_postgres: OwnPostgres, standby: Standby
) -> None:
    async with api_reading_from(settings, own_postgres, standby, max_lag=60) as (client, reads):
        tenant = await new_tenant(client, "replica")
        endpoint = await new_endpoint(client, tenant)
        first = await post_deliveries(client, tenant, endpoint["id"], 2)
        await until(lambda: reads.replicas[0].unusable is None)
        await until_replayed(standby, len(first))

        await standby.sql("SELECT pg_wal_replay_pause()")
        [late] = await post_deliveries(client, tenant, endpoint["id"], 1)

        # The listing is the replica's: it has not replayed the late delivery, and says how
        # far behind it may be.
        answer = await listed(client, tenant)
        assert {d["id"] for d in answer.json()["items"]} == set(first)
        assert 0 <= float(answer.headers[LAG]) <= 60
        assert await standby.sql("SELECT count(*) FROM deliveries WHERE id = $1", late) == 0
        # The late delivery by id: the replica has no such row, the primary answers.
        by_id = await client.get(f"/v1/deliveries/{late}", headers=tenant)
        assert by_id.status_code == 200 and by_id.json()["id"] == late
        assert LAG not in by_id.headers
        # The fleet gauges are the replica's too, and say how it stands.
        gauges = (await client.get("/metrics", headers=ADMIN)).text
        assert f'herald_deliveries{{region="{settings.region}",state="pending"}} 2.0' in gauges
        assert 'herald_replica_usable{replica="replica-0"} 1.0' in gauges
        # An id no server knows is a 404 still.
        missing = await client.get(f"/v1/deliveries/{new_id('dlv')}", headers=tenant)
        assert missing.status_code == 404

        await standby.sql("SELECT pg_wal_replay_resume()")
        await until_replayed(standby, len(first) + 1)
        await until(lambda: reads.replicas[0].unusable is None)
        assert {d["id"] for d in (await listed(client, tenant)).json()["items"]} == {*first, late}


async def until_replayed(standby: Standby, deliveries: int) -> None:
    await until_replayed_on(standby, "SELECT count(*) FROM deliveries", deliveries)


async def test_a_replica_past_the_bound_is_passed_by_until_it_catches_up(
    settings: Settings, own_postgres: OwnPostgres, standby: Standby
) -> None:
    async with api_reading_from(settings, own_postgres, standby, max_lag=0.5) as (client, reads):
        tenant = await new_tenant(client, "lagging")
        endpoint = await new_endpoint(client, tenant)
        await until(lambda: reads.replicas[0].unusable is None)
        await standby.sql("SELECT pg_wal_replay_pause()")
        with capture_logs() as logs:
            [late] = await post_deliveries(client, tenant, endpoint["id"], 1)
            await until(lambda: reads.replicas[0].unusable is not None)

        assert reads.replicas[0].unusable == "more than 0.5 s behind"
        assert [e for e in logs if e["event"] == "replica.unusable"]
        # Served by the primary: the late delivery is there, and no lag is claimed.
        answer = await listed(client, tenant)
        assert [d["id"] for d in answer.json()["items"]] == [late]
        assert LAG not in answer.headers

        await standby.sql("SELECT pg_wal_replay_resume()")
        await until_read_from_the_replica(client, tenant)


async def test_a_stopped_replica_costs_no_read_an_error(
    settings: Settings, own_postgres: OwnPostgres, standby: Standby
) -> None:
    async with api_reading_from(settings, own_postgres, standby, max_lag=60) as (client, reads):
        tenant = await new_tenant(client, "stopped")
        endpoint = await new_endpoint(client, tenant)
        [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
        await until(lambda: reads.replicas[0].unusable is None)
        await until_replayed(standby, 1)

        await asyncio.to_thread(standby.stop)
        # The first reads may still be sent to it: they fail there and the primary answers.
        for _ in range(5):
            answer = await listed(client, tenant)
            assert [d["id"] for d in answer.json()["items"]] == [delivery]
        await until(lambda: reads.replicas[0].unusable is not None)
        assert (reads.replicas[0].unusable or "").startswith(("unreachable", "failed a read"))

        await asyncio.to_thread(standby.start)
        await until_read_from_the_replica(client, tenant)


async def test_a_promoted_replica_is_no_longer_read(
    settings: Settings, own_postgres: OwnPostgres, standby: Standby
) -> None:
    async with api_reading_from(settings, own_postgres, standby, max_lag=60) as (client, reads):
        tenant = await new_tenant(client, "promoted")
        endpoint = await new_endpoint(client, tenant)
        await until(lambda: reads.replicas[0].unusable is None)

        await asyncio.to_thread(standby.promote)
        await until(lambda: reads.replicas[0].unusable is not None)
        assert reads.replicas[0].unusable == "promoted: it no longer follows the primary"
        # Written to the primary after the promotion: the promoted server never sees it.
        [after] = await post_deliveries(client, tenant, endpoint["id"], 1)
        answer = await listed(client, tenant)
        assert [d["id"] for d in answer.json()["items"]] == [after]
        assert LAG not in answer.headers


async def test_a_replica_that_hangs_mid_read_costs_no_read_an_error(
    settings: Settings, own_postgres: OwnPostgres, standby: Standby
) -> None:
    async with api_reading_from(settings, own_postgres, standby, max_lag=60) as (client, reads):
        tenant = await new_tenant(client, "hung")
        endpoint = await new_endpoint(client, tenant)
        [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
        await until(lambda: reads.replicas[0].unusable is None)
        await until_replayed(standby, 1)
        await until_read_from_the_replica(client, tenant)  # a pooled connection to it is open

        # Cut off as by a network partition: its processes stop, their sockets stay open, and
        # nothing answers -- no reset, no refusal.
        with standby.frozen():
            answer = await listed(client, tenant)
            assert [d["id"] for d in answer.json()["items"]] == [delivery]
            assert LAG not in answer.headers  # the primary answered
            await until(lambda: reads.replicas[0].unusable is not None)
        await until_read_from_the_replica(client, tenant)


async def test_a_replica_still_following_a_failed_over_primary_is_not_read(
    settings: Settings, own_postgres: OwnPostgres, standby: Standby, tmp_path: Path
) -> None:
    # A failover: a second standby is promoted and becomes Herald's primary, while the first
    # still streams from the old primary -- which, not quite dead, goes on writing.
    promoted = await asyncio.to_thread(
        Standby.from_primary, own_postgres.stack.database_url, tmp_path / "promoted"
    )
    try:
        await asyncio.to_thread(promoted.promote)
        old = own_postgres.stack.database_url
        await sql(old, "CREATE TABLE after_the_fork AS SELECT generate_series(1, 100000) AS n")
        await until_replayed_on(standby, "SELECT count(*) FROM after_the_fork", 100_000)
        # By position alone the old timeline's standby is ahead of the new primary: it has
        # replayed everything the new primary has written, and more.
        ahead = await standby.sql(
            "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn",
            await promoted.sql("SELECT pg_current_wal_lsn()::text"),
        )
        assert ahead is True
        stack = Stack(promoted.url, own_postgres.stack.redis_url, own_postgres.stack.workdir)
        new_primary = OwnPostgres(own_postgres.server, stack, own_postgres.engine)
        async with api_reading_from(settings, new_primary, standby, max_lag=60) as (
            client,
            reads,
        ):
            await until(lambda: reads.replicas[0].unusable != "not yet probed")
            assert reads.replicas[0].unusable == "it follows timeline 1, not 2"
            tenant = await new_tenant(client, "failed-over")
            assert LAG not in (await listed(client, tenant)).headers
    finally:
        with suppress(CalledProcessError):
            await asyncio.to_thread(promoted.stop)
        shutil.rmtree(promoted.socket_dir, ignore_errors=True)


async def sql(url: str, statement: str) -> None:
    connection = await asyncpg.connect(plain_dsn(url))
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


async def until_replayed_on(standby: Standby, query: str, expected: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        with suppress(asyncpg.UndefinedTableError):
            if await standby.sql(query) == expected:
                return
        assert time.monotonic() < deadline, "the standby never replayed it"
        await asyncio.sleep(0.05)
