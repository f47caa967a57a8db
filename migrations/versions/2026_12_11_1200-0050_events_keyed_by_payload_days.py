"""events keyed by (id, payload_days), so that a day of events can be partitioned by it

A partitioned table's key must hold every partition key beneath it: for a day of events to be
partitioned by ``payload_days`` (app/operations/repository/partitions.py), the key of events
becomes (id, payload_days). Nothing is rebuilt under a lock that stops writes: each existing
partition gets its (id, payload_days) index built concurrently and made a constraint, and one
short transaction then swaps the parent's key, which takes those indexes as they are.

Days already made stay as they are: until a tenant keeps its payloads shorter than the
operator's retention, a day of events is one table, as before; once one does, reconcile makes
the empty days ahead again partitioned by payload class.

Every step is skipped when done, so a run cut short is run again.

Revision ID: 0050
Revises: 0049
Create Date: 2026-12-11 12:00:00+00:00
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import asyncpg
from alembic import op
from sqlalchemy.util import await_only

revision: str = "0050"
down_revision: str | None = "0049"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LOCK_TIMEOUT = "200ms"
TRIES = 100
LONG_STATEMENT_S = 24 * 3600.0  # an index built over the table from before partitioning


def _driver() -> asyncpg.Connection:
    return op.get_bind().connection.driver_connection


def _run(sql: str, *, timeout: float | None = None) -> None:
    await_only(_driver().execute(sql, timeout=timeout))


def _fetch(sql: str, *args: object) -> list[asyncpg.Record]:
    rows: list[asyncpg.Record] = await_only(_driver().fetch(sql, *args))
    return rows


def _atomically(statements: list[str]) -> None:
    """One transaction under the short lock_timeout, tried again while a lock is not had."""
    script = "\n".join(
        ["BEGIN;", f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}';", *statements, "COMMIT;"]
    )
    for attempt in range(TRIES):
        try:
            _run(script)
            return
        except asyncpg.exceptions.LockNotAvailableError:
            _run("ROLLBACK")
            time.sleep(min(0.05 * (attempt + 1), 1.0))
    raise RuntimeError(f"could not take the locks in {TRIES} tries: run `herald migrate` again")


def _keyed_by_payload_days() -> bool:
    [row] = _fetch(
        "SELECT array_length(indkey, 1) AS columns FROM pg_index"
        " WHERE indrelid = 'events'::regclass AND indisprimary"
    )
    return bool(row["columns"] == 2)


def _rekey() -> None:
    partitions = _fetch(
        "SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'events'::regclass AND c.relkind = 'r' ORDER BY c.relname"
    )
    for partition in partitions:
        table, index = partition["name"], f"{partition['name']}_id_payload_days"
        if _fetch("SELECT FROM pg_constraint WHERE conname = $1", index):
            continue
        # An index left invalid by a build cut short is built again.
        _run(f"DROP INDEX CONCURRENTLY IF EXISTS {index}")
        _run(
            f"CREATE UNIQUE INDEX CONCURRENTLY {index} ON {table} (id, payload_days)",
            timeout=LONG_STATEMENT_S,
        )
        _atomically([f"ALTER TABLE {table} ADD CONSTRAINT {index} UNIQUE USING INDEX {index};"])
    [key] = _fetch(
        "SELECT conname AS name FROM pg_constraint"
        " WHERE conrelid = 'events'::regclass AND contype = 'p'"
    )
    # A partition attached since the loop above (a day made meanwhile, empty) gets its index
    # built here, in no time.
    _atomically(
        [
            f"ALTER TABLE events DROP CONSTRAINT {key['name']};",
            f"ALTER TABLE events ADD CONSTRAINT {key['name']} PRIMARY KEY (id, payload_days);",
        ]
    )


def upgrade() -> None:
    with op.get_context().autocommit_block():
        if not _keyed_by_payload_days():
            _rekey()


def downgrade() -> None:
    raise NotImplementedError(
        "the key of events is not narrowed again: a day partitioned by payload class needs it"
    )
