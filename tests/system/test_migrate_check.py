"""`herald migrate --check` and `--wait`, what the Kubernetes Deployments' initContainers run so
that the API and the workers start only once the migration Job has brought the schema to their
release: real `herald` processes against a database of this test's own."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from tests.fixtures.processes import clean_env, free_port
from tests.fixtures.stack import Stack, plain_dsn, scratch_database

REPO = Path(__file__).resolve().parents[2]
NAME = "herald_migrate_check"


def herald(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        env=clean_env(HERALD_DATABASE_URL=database_url),
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.fixture
async def empty_database(stack: Stack) -> AsyncIterator[str]:
    url = await scratch_database(stack.database_url, NAME, create=True)
    try:
        yield url
    finally:
        await scratch_database(stack.database_url, NAME, create=False)


async def set_revision(database_url: str, revision: str) -> None:
    connection = await asyncpg.connect(plain_dsn(database_url))
    try:
        await connection.execute("UPDATE alembic_version SET version_num = $1", revision)
    finally:
        await connection.close()


async def test_the_check_fails_until_the_schema_is_this_releases_and_says_why(
    empty_database: str,
) -> None:
    never = await asyncio.to_thread(herald, empty_database, "migrate", "--check")
    assert never.returncode == 1
    assert "no migration has been applied yet: run `herald migrate`" in never.stderr

    migrated = await asyncio.to_thread(herald, empty_database, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    current = await asyncio.to_thread(herald, empty_database, "migrate", "--check")
    assert current.returncode == 0, current.stderr
    assert "database is at the latest migration" in current.stdout

    # A release behind: its migration Job has not run yet.
    await set_revision(empty_database, "0018")
    behind = await asyncio.to_thread(herald, empty_database, "migrate", "--check")
    assert behind.returncode == 1
    assert "database is at 0018; this release needs" in behind.stderr

    # A revision this release does not know is a later release's: after a rollback the older
    # image runs on the schema the later one expanded, so its pods must still start.
    await set_revision(empty_database, "9999")
    later = await asyncio.to_thread(herald, empty_database, "migrate", "--check")
    assert later.returncode == 0, later.stderr
    assert "does not know: a later release's" in later.stdout


async def test_the_check_fails_and_says_so_when_the_database_cannot_be_reached() -> None:
    nowhere = f"postgresql://herald:secret-password@127.0.0.1:{free_port()}/herald"
    unreachable = await asyncio.to_thread(herald, nowhere, "migrate", "--check")
    assert unreachable.returncode == 1
    assert "the database cannot be reached" in unreachable.stderr
    assert "secret-password" not in unreachable.stderr + unreachable.stdout


async def test_wait_returns_once_the_migration_has_run_and_not_before(
    empty_database: str,
) -> None:
    waiting = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli",
        "migrate",
        "--wait",
        env=clean_env(HERALD_DATABASE_URL=empty_database),
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert waiting.stderr is not None

        # It has looked, found nothing applied, and goes on waiting (its log lines go to
        # stderr as well).
        async def said_why() -> None:
            assert waiting.stderr is not None
            while b"no migration has been applied yet" not in (
                line := await waiting.stderr.readline()
            ):
                assert line, "herald migrate --wait ended without saying why it waits"

        await asyncio.wait_for(said_why(), timeout=60)
        assert waiting.returncode is None
        migrated = await asyncio.to_thread(herald, empty_database, "migrate")
        assert migrated.returncode == 0, migrated.stderr
        assert await asyncio.wait_for(waiting.wait(), timeout=60) == 0
        assert waiting.stdout is not None
        assert b"database is at the latest migration" in await waiting.stdout.read()
    finally:
        if waiting.returncode is None:
            waiting.kill()
            await waiting.wait()
