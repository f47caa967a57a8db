"""What production runs beside the API and the workers: the worker's health check
(``herald worker --check``) against a real worker, and the reconcile cron
(``herald reconcile [--every]``) against a real ``herald api``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.processes import (
    ApiProcess,
    clean_env,
    herald_env,
    running_worker,
    start_api,
    wait_healthy,
)
from tests.fixtures.stack import Stack
from tests.fixtures.waiting import count_rows, eventually

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


def start_cron(env: dict[str, str], interval: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", "reconcile", "--every", interval],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@contextmanager
def api_process(stack: Stack, logs: Path) -> Iterator[ApiProcess]:
    api = start_api(stack, logs)
    try:
        yield api
    finally:
        api.process.terminate()
        api.process.wait(timeout=30)


async def test_the_worker_check_says_healthy_while_the_worker_runs_and_not_after(
    stack: Stack, tmp_path: Path
) -> None:
    beat = tmp_path / "worker.heartbeat"
    env = herald_env(stack, HERALD_WORKER_HEARTBEAT_FILE=str(beat))
    log = tmp_path / "worker.log"
    with running_worker(stack, log, HERALD_WORKER_HEARTBEAT_FILE=str(beat)) as worker:
        healthy = herald(env, "worker", "--check")
        assert healthy.returncode == 0, healthy.stderr
        assert "the worker beat" in healthy.stdout
        # The image's HEALTHCHECK, told (or finding) that its container runs a worker.
        assert herald({**env, "HERALD_ROLE": "worker"}, "health").returncode == 0
        # A worker whose loop stopped beating (stuck) is unhealthy, whatever the process does:
        # stopped for real (SIGSTOP), so no beat can land while the check runs, and its last
        # beat made a minute old rather than waiting for it to age.
        worker.process.send_signal(signal.SIGSTOP)
        try:
            worker.wait_stalled()
            stale = time.time() - 60
            os.utime(beat, (stale, stale))
            stuck = herald(env, "worker", "--check")
        finally:
            worker.resume()
        assert stuck.returncode == 1 and "its event loop is stuck" in stuck.stderr
    stopped = herald(env, "worker", "--check")
    assert stopped.returncode == 1 and "the worker is not running" in stopped.stderr
    assert herald({**env, "HERALD_ROLE": "worker"}, "health").returncode == 1


async def test_the_reconcile_cron_starts_runs_and_says_when_it_cannot(
    stack: Stack, engine: AsyncEngine, tmp_path: Path
) -> None:
    with api_process(stack, tmp_path) as api:
        await wait_healthy(api)
        env = herald_env(stack, HERALD_API_URL=api.base_url)
        port = api.base_url.rsplit(":", 1)[1]
        api_health = herald({**env, "HERALD_ROLE": "api", "HERALD_PORT": port}, "health")
        assert api_health.returncode == 0, api_health.stderr
        no_api = herald({**env, "HERALD_ROLE": "api", "HERALD_PORT": "9"}, "health")
        assert no_api.returncode == 1 and "the API does not answer" in no_api.stderr
        assert herald({**env, "HERALD_ROLE": "migrate"}, "health").returncode == 0
        once = herald(env, "reconcile")
        assert once.returncode == 0, once.stderr
        assert once.stdout.startswith("reconcile run run_") and once.stdout.endswith("started\n")
        assert await count_rows(engine, "reconcile_runs", "trigger = 'cron'") == 1

        unreachable = herald({**env, "HERALD_API_URL": "http://127.0.0.1:9"}, "reconcile")
        assert unreachable.returncode == 1 and "unreachable" in unreachable.stderr
        wrong_key = herald({**env, "HERALD_ADMIN_API_KEY": "x" * 32}, "reconcile")
        assert wrong_key.returncode == 1 and "401" in wrong_key.stderr
        no_key = herald(clean_env(HERALD_API_URL=api.base_url), "reconcile")
        assert no_key.returncode == 2 and "HERALD_ADMIN_API_KEY" in no_key.stderr

        # --every keeps going until it is told to stop, and stops cleanly.
        every = start_cron(env, "0.2s")
        try:
            await eventually(
                lambda: count_rows(engine, "reconcile_runs", "trigger = 'cron'"),
                lambda runs: runs >= 3,
                timeout=60,
            )
        finally:
            every.send_signal(signal.SIGTERM)
            assert every.wait(timeout=30) == 0
