"""What one attempt costs a worker on the wire, counted by a proxy in front of each server: its
statements to PostgreSQL and its commands to Redis, apart from what the worker's clocks send
whether or not there is work (the relay's page, the wake-up poll, arq's queue poll)."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.flow.service import gate_scripts, wakeup_scripts
from tests.fixtures.api import new_endpoint
from tests.fixtures.processes import running_workers
from tests.fixtures.receiver import Receiver
from tests.fixtures.stack import Stack
from tests.fixtures.waiting import count_rows, eventually, until
from tests.fixtures.wire import PostgresReader, RedisReader, Totals, counting_proxy

ATTEMPTS = 5
CLAIM, RECORD = "WITH picked AS MATERIALIZED", "SELECT record_attempts("
# The relay's page of unpublished outbox rows, each in its own transaction, on its clock.
RELAY_PAGE = "UPDATE outbox_wakeups SET claimed_until"
# arq's queue, polled; redis-py's health check, and a new connection's handshake.
CLOCKED_COMMANDS = {"BLPOP", "ZRANGEBYSCORE", "PING", "CLIENT SETINFO", "CLIENT SETNAME"}
CLOCKED_SCRIPTS = {"wakeup_scripts.TAKE"}  # the pump's wait for a due destination
# asyncpg's look-up of a type, once per connection that first meets it (jit off meanwhile).
INTROSPECTION = ("WITH RECURSIVE typeinfo_tree", "SELECT current_setting('jit')",
                 "SELECT set_config('jit'")  # fmt: skip


def script_names() -> dict[str, str]:
    """Herald's Redis scripts by the SHA-1 that EVALSHA names them with."""
    return {
        hashlib.sha1(
            text.encode(), usedforsecurity=False
        ).hexdigest(): f"{module.__name__.rsplit('.', 1)[1]}.{name}"
        for module in (gate_scripts, wakeup_scripts)
        for name, text in vars(module).items()
        if name.isupper() and isinstance(text, str)
    }


async def test_an_attempt_is_a_claim_and_a_record_and_four_scripts(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/hook"))
    body = {"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {}}

    async def deliver(n: int) -> None:
        """The n-th delivery, accepted, delivered and recorded before the next."""
        assert (await client.post("/v1/deliveries", json=body, headers=tenant)).status_code == 202
        await receiver.wait_for("/hook", n)
        succeeded = await eventually(
            lambda: count_rows(engine, "deliveries", "state = 'succeeded'"), lambda c: c == n
        )
        assert succeeded == n

    async with (
        counting_proxy(stack.database_url, PostgresReader) as (database_url, postgres),
        counting_proxy(stack.redis_url, RedisReader) as (redis_url, redis),
        # The relay on its slowest clock: on a loaded machine the API's publish mark can come
        # later than the relay's head start, and the relay then arms the destination again --
        # harmless (the second wake-up claims nothing), but one claim more than this counts.
        running_workers(
            Stack(database_url, redis_url, stack.workdir),
            [tmp_path / "w.log"],
            HERALD_RELAY_INTERVAL_SECONDS="60",
        ),
    ):
        await deliver(1)  # statements prepared, scripts loaded, the endpoint's settings cached
        postgres.clear()
        redis.clear()
        for n in range(2, ATTEMPTS + 2):
            await deliver(n)
        # The slot is released, and the turn settled, after the record commits; the counts are
        # read between two of the relay's pages (its clock runs on, and a page caught between
        # its BEGIN and COMMIT would count as half a transaction). No await separates the last
        # check from the read, so nothing is counted in between.
        await until(lambda: _settled(postgres, redis))
        statements, commands, scripts = _worked(postgres, redis)

    # PostgreSQL: one claim, one record (the group commit of one ending), one round trip each.
    assert statements == Counter({CLAIM: ATTEMPTS, RECORD: ATTEMPTS})
    # Redis: the destination's start granted (rate and slot), what it did not use handed back,
    # its slot released, its wake-up settled -- one script call each; no other command.
    assert commands == Counter()
    assert scripts == Counter(
        {
            "gate_scripts.GRANT": ATTEMPTS,
            "gate_scripts.RETURN_UNUSED": ATTEMPTS,
            "gate_scripts.RELEASE_SLOTS": ATTEMPTS,
            "wakeup_scripts.SETTLE": ATTEMPTS,
        }
    )


async def _settled(postgres: Totals, redis: Totals) -> bool:
    """Every attempt's slot released and turn settled, and no relay page half-way through."""
    names = script_names()
    counts = [
        sum(n for sha, n in redis.scripts.items() if names.get(sha) == name)
        for name in ("gate_scripts.RELEASE_SLOTS", "wakeup_scripts.SETTLE")
    ]
    relay_pages = postgres.ran(RELAY_PAGE)
    between_pages = postgres.ran("BEGIN;") == postgres.ran("COMMIT;") == relay_pages
    return min(counts) >= ATTEMPTS and between_pages


def _worked(postgres: Totals, redis: Totals) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """What the worker sent for its attempts: everything but its clocks' traffic and a new
    connection's set-up (a prepare, asyncpg's type look-up), each checked to be only that."""
    relay_pages = postgres.ran(RELAY_PAGE)
    assert postgres.ran("BEGIN;") == postgres.ran("COMMIT;") == relay_pages
    statements: Counter[str] = Counter()
    set_up = 0
    for sql, count in postgres.statements.items():
        if RELAY_PAGE in sql or sql in ("BEGIN;", "COMMIT;"):
            continue
        if sql.startswith(INTROSPECTION):
            set_up += count
            continue
        label = next((name for name in (CLAIM, RECORD) if sql.startswith(name)), sql)
        statements[label] += count
    # Every round trip accounted for: a statement run, or a prepare on its own.
    assert postgres.round_trips == (
        sum(statements.values()) + 3 * relay_pages + set_up + postgres.prepared
    )
    names = script_names()
    scripts = Counter({names.get(sha, sha): n for sha, n in redis.scripts.items()})
    for clocked in CLOCKED_SCRIPTS:
        del scripts[clocked]
    commands = Counter(
        {
            name: n
            for name, n in redis.commands.items()
            if name not in {"EVALSHA", *CLOCKED_COMMANDS}
        }
    )
    return statements, commands, scripts
