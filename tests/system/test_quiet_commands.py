"""What the commands a first-time user runs print: what they did, and nothing of their
libraries' set-up -- ``herald migrate`` a line per migration it applied and one summary,
``herald reconcile`` one line per run, and the editable installs of ``make run`` no setuptools
warning."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from app.core.migrate import alembic_config
from app.operations.repository.partitions import TABLES as PARTITIONED
from tests.fixtures.processes import herald_env, start_api, wait_healthy
from tests.fixtures.stack import Stack, scratch_database

REPO = Path(__file__).resolve().parents[2]


def herald(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def revisions(database_url: str) -> list[str]:
    """Every migration, oldest first."""
    scripts = ScriptDirectory.from_config(alembic_config(database_url))
    return [script.revision for script in reversed(list(scripts.walk_revisions()))]


async def test_migrate_prints_one_line_per_migration_applied_and_a_summary(
    stack: Stack,
) -> None:
    database_url = await scratch_database(stack.database_url, "herald_quiet_migrate", create=True)
    try:
        env = herald_env(stack, HERALD_DATABASE_URL=database_url)
        first = herald(env, "migrate")
        assert first.returncode == 0, first.stderr
        made = len(PARTITIONED) * (14 + 1 - 7)  # the migration itself made the first week
        assert first.stdout == (
            "database is at the latest migration\n"
            f"partitions made through 14 days ahead ({made} new)\n"
        )
        logged = [json.loads(line) for line in first.stderr.splitlines()]
        applied = logged[:-1]
        assert [line["event"] for line in applied] == ["migration.applied"] * len(applied)
        assert [line["revision"] for line in applied] == revisions(database_url)
        assert (logged[-1]["event"], logged[-1]["count"]) == ("partitions.made", made)
        # Nothing left to apply: the summary alone.
        again = herald(env, "migrate")
        assert again.returncode == 0, again.stderr
        assert (again.stdout, again.stderr) == (
            "database is at the latest migration\npartitions made through 14 days ahead (0 new)\n",
            "",
        )
    finally:
        await scratch_database(stack.database_url, "herald_quiet_migrate", create=False)


async def test_reconcile_prints_one_line_per_run(stack: Stack, tmp_path: Path) -> None:
    api = start_api(stack, tmp_path)
    try:
        await wait_healthy(api)
        ran = herald(herald_env(stack, HERALD_API_URL=api.base_url), "reconcile")
    finally:
        api.stop()
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr == ""  # no HTTP client's line per request
    [said] = ran.stdout.splitlines()
    assert said.startswith("reconcile run run_") and said.endswith(" started")


@pytest.mark.parametrize("project", [".", "clients/python"])
def test_an_editable_install_of_herald_prints_no_setuptools_warning(
    tmp_path: Path, project: str
) -> None:
    # What `make run` (the Makefile's install step) does, into a throwaway environment.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
    installed = subprocess.run(
        [*pip, "install", "--quiet", "--no-deps", "-e", str(REPO / project)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    assert "Warning" not in installed.stdout + installed.stderr, installed.stderr
