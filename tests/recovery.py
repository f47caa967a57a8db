"""What every recovery test asserts, at the receiver and in the database."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence

import asyncpg
import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.receiver import Receiver
from tests.support import ADMIN, plain_dsn

# Every transition the state machine allows (design.md, "States"); redrive (dead -> pending)
# is not part of any recovery scenario. A retry is written `leased -> enqueued` directly: its
# destination's wake-up covers it from the record on (docs/plans/issue-12-delivery-engine.md,
# section 3). `leased -> pending` is a lease given back unsent.
ALLOWED_TRANSITIONS = {
    ("pending", "enqueued"),
    ("pending", "leased"),
    ("enqueued", "leased"),
    ("leased", "pending"),
    ("leased", "enqueued"),
    ("leased", "succeeded"),
    ("leased", "dead"),
}
MAX_ATTEMPTS = 5  # tests.processes.FAST_WORKER_ENV: four retries + 1


# Test-only audit of every state change, so recovery tests can prove no state moved backwards.
STATE_LOG_DDL = [
    "CREATE TABLE IF NOT EXISTS test_state_log (delivery_id text, old_state text,"
    " new_state text, at timestamptz DEFAULT clock_timestamp())",
    "CREATE OR REPLACE FUNCTION test_log_state() RETURNS trigger LANGUAGE plpgsql AS $$"
    " BEGIN IF NEW.state IS DISTINCT FROM OLD.state THEN"
    " INSERT INTO test_state_log (delivery_id, old_state, new_state)"
    " VALUES (NEW.id, OLD.state, NEW.state); END IF; RETURN NEW; END $$",
    "DROP TRIGGER IF EXISTS test_state_log ON deliveries",
    "CREATE TRIGGER test_state_log AFTER UPDATE ON deliveries"
    " FOR EACH ROW EXECUTE FUNCTION test_log_state()",
]


async def install_state_log(database_url: str) -> None:
    connection = await asyncpg.connect(plain_dsn(database_url))
    try:
        for statement in STATE_LOG_DDL:
            await connection.execute(statement)
    finally:
        await connection.close()


async def states(engine: AsyncEngine, ids: Sequence[str]) -> dict[str, str]:
    async with engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT id, state FROM deliveries WHERE id = ANY(:ids)"), {"ids": list(ids)}
        )
        return {row.id: row.state for row in rows}


async def transitions(engine: AsyncEngine, delivery_id: str) -> list[tuple[str, str]]:
    """The delivery's state changes, in order (the suite's test-only state log)."""
    async with engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT old_state, new_state FROM test_state_log WHERE delivery_id = :d ORDER BY at"
            ),
            {"d": delivery_id},
        )
        return [(row.old_state, row.new_state) for row in rows]


async def reconcile_until_succeeded(
    client: httpx.AsyncClient, engine: AsyncEngine, ids: Sequence[str], timeout: float = 60.0
) -> None:
    """Trigger reconcile (as cron would) until every delivery succeeded."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        current = await states(engine, ids)
        if all(current.get(i) == "succeeded" for i in ids):
            return
        if asyncio.get_running_loop().time() > deadline:
            left = Counter(current.get(i, "missing") for i in ids)
            raise AssertionError(f"not all succeeded after {timeout} s: {dict(left)}")
        response = await client.post("/v1/reconcile", json={"trigger": "test"}, headers=ADMIN)
        assert response.status_code == 202, response.text
        await asyncio.sleep(1.0)


async def assert_recovered(
    engine: AsyncEngine,
    receiver: Receiver,
    path: str,
    ids: Sequence[str],
    crashes: int,
) -> None:
    """The fault suite's contract (issue 4)."""
    assert set((await states(engine, ids)).values()) == {"succeeded"}
    seen = Counter(r.headers["webhook-id"] for r in receiver.on(path))
    for delivery_id in ids:
        assert 1 <= seen[delivery_id] <= 1 + crashes, (delivery_id, seen[delivery_id])
    for request in receiver.on(path):
        # Every repeat carried the same key as the first.
        assert request.headers["Idempotency-Key"] == request.headers["webhook-id"]
    assert set(seen) <= set(ids), "something was sent that was never accepted"
    async with engine.connect() as connection:
        most = (
            await connection.execute(
                text(
                    "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM attempts"
                    " GROUP BY delivery_id) AS per_delivery"
                )
            )
        ).scalar_one()
        transitions = {
            (row.old_state, row.new_state)
            for row in await connection.execute(
                text("SELECT DISTINCT old_state, new_state FROM test_state_log")
            )
        }
    assert most <= MAX_ATTEMPTS
    assert transitions <= ALLOWED_TRANSITIONS, transitions - ALLOWED_TRANSITIONS
