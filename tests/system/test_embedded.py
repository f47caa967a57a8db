"""The embedded servers `herald-dev` relies on recover from what an interruption leaves."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psutil

from devstack.embedded import EmbeddedPostgres, EmbeddedRedis


def _psql(url_dir: str, database: str, sql: str) -> str:
    from pgserver._commands import POSTGRES_BIN_PATH

    return subprocess.run(
        [str(POSTGRES_BIN_PATH / "psql"), f"postgresql://postgres@/{database}?host={url_dir}"],
        input=sql,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_a_cluster_whose_first_start_was_interrupted_is_rebuilt(tmp_path: Path) -> None:
    data = tmp_path / "pg"
    postgres = EmbeddedPostgres(data)
    url = postgres.start()
    socket_dir = url.split("host=")[1]
    # What Ctrl-C during initdb leaves: files that look like a cluster, without its databases.
    _psql(socket_dir, "template1", "DROP DATABASE postgres; DROP DATABASE herald;")
    postgres.stop()
    (data / "herald-ready").unlink()

    again = EmbeddedPostgres(data)
    try:
        assert again.start() == url
        assert "1" in _psql(socket_dir, "herald", "SELECT 1;")
    finally:
        again.stop()
    assert (data / "herald-ready").exists()


def test_a_finished_cluster_is_never_discarded(tmp_path: Path) -> None:
    data = tmp_path / "pg"
    postgres = EmbeddedPostgres(data)
    url = postgres.start()
    socket_dir = url.split("host=")[1]
    _psql(socket_dir, "herald", "CREATE TABLE keep_me (id int); INSERT INTO keep_me VALUES (7);")
    postgres.stop()

    again = EmbeddedPostgres(data)
    try:
        again.start()
        assert "7" in _psql(socket_dir, "herald", "SELECT id FROM keep_me;")
    finally:
        again.stop()


def test_redis_left_running_by_a_dead_owner_is_replaced(tmp_path: Path) -> None:
    first = EmbeddedRedis(tmp_path / "redis")
    first.start()
    orphan = first.pid
    assert orphan is not None and psutil.pid_exists(orphan)
    # The owner "dies" without stopping it; a new owner takes over the data dir.
    second = EmbeddedRedis(tmp_path / "redis")
    try:
        second.start()
        assert second.pid != orphan
        assert not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == "zombie"
    finally:
        second.stop()
        first.pid = None
