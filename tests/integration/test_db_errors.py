"""Which database errors a worker waits out and tries again, raised by a real PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.db import create_engine, is_transient
from tests.fixtures.stack import Stack, plain_dsn


def raising(sqlstate: str) -> str:
    return f"DO $$ BEGIN RAISE EXCEPTION 'test' USING ERRCODE = '{sqlstate}'; END $$"


async def error_of(engine: AsyncEngine, *statements: str) -> Exception:
    """What running ``statements`` through SQLAlchemy raised (it must raise)."""
    try:
        async with engine.connect() as connection:
            for statement in statements:
                await connection.execute(text(statement))
    except Exception as exc:
        return exc
    raise AssertionError("no error")


@pytest.mark.parametrize(
    ("sqlstate", "transient"),
    [
        ("40P01", True),  # deadlock detected
        ("40001", True),  # serialization failure
        ("53300", True),  # too many connections
        ("57P03", True),  # cannot connect now (starting up)
        ("08006", True),  # connection failure
        ("23505", False),  # unique violation
        ("22012", False),  # division by zero
        ("42P01", False),  # undefined table
    ],
)
async def test_passing_database_errors_are_told_from_lasting_ones(
    engine: AsyncEngine, stack: Stack, sqlstate: str, transient: bool
) -> None:
    # Through SQLAlchemy (sessions), where the driver's error arrives wrapped...
    assert is_transient(await error_of(engine, raising(sqlstate))) is transient
    # ...and straight from the driver (db.single_statements).
    connection = await asyncpg.connect(plain_dsn(stack.database_url))
    try:
        with pytest.raises(asyncpg.PostgresError) as raw:
            await connection.execute(raising(sqlstate))
    finally:
        await connection.close()
    assert is_transient(raw.value) is transient


async def test_an_unreachable_or_terminated_database_is_transient(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    nowhere = create_engine(f"postgresql+asyncpg://postgres@/herald?host={tmp_path}")
    try:
        assert is_transient(await error_of(nowhere, "SELECT 1"))
    finally:
        await nowhere.dispose()
    terminated = await error_of(engine, "SELECT pg_terminate_backend(pg_backend_pid())", "SELECT 1")
    assert is_transient(terminated)
