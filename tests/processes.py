"""Real Herald processes for tests: `herald worker` / `herald api` as subprocesses."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

from app.faults import FAULT_EXIT_CODE
from tests.support import ADMIN_KEY, LOOPBACK_ALLOWLIST, Stack

# Short clocks so failure paths play out in seconds.
FAST_WORKER_ENV = {
    "HERALD_RETRY_SCHEDULE": "0.3,0.3,0.3,0.3",
    "HERALD_REQUEST_TIMEOUT_SECONDS": "1.5",
    "HERALD_LEASE_SECONDS": "4",
    "HERALD_WORKER_CONCURRENCY": "20",
    "HERALD_RELAY_INTERVAL_SECONDS": "0.2",
}

# Short reconcile clocks so that recovery by lease expiry and staleness plays out in seconds.
RECOVERY_ENV = {
    "HERALD_LEASE_SECONDS": "3",
    "HERALD_ENQUEUED_STALE_SECONDS": "2",
    "HERALD_RECONCILE_GRACE_SECONDS": "0.5",
    "HERALD_RELAY_CLAIM_SECONDS": "2",
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def clean_env(**values: str) -> dict[str, str]:
    """This environment without any ``HERALD_*`` variable, plus ``values``."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("HERALD_")}
    return {**env, **values}


def herald_env(stack: Stack, **overrides: str) -> dict[str, str]:
    """Settings for a Herald process on the test stack."""
    env = clean_env()
    env.update(
        HERALD_DATABASE_URL=stack.database_url,
        HERALD_REDIS_URL=stack.redis_url,
        HERALD_ADMIN_API_KEY=ADMIN_KEY,
        HERALD_DESTINATION_ALLOWLIST=LOOPBACK_ALLOWLIST,
        PYTHONUNBUFFERED="1",
    )
    env.update(overrides)
    return env


@dataclass
class HeraldProcess:
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """The process's structured log lines (JSON), optionally only those of one event."""
        parsed = []
        for line in self.output().splitlines():
            if line.startswith("{"):
                entry: dict[str, Any] = json.loads(line)
                if name is None or entry.get("event") == name:
                    parsed.append(entry)
        return parsed

    def wait_for_log(self, needle: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.output():
            if self.process.poll() is not None:
                raise AssertionError(
                    f"process exited ({self.process.returncode}):\n{self.output()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} not logged within {timeout} s:\n{self.output()}")
            time.sleep(0.05)

    def wait_stalled(self, timeout: float = 30.0) -> None:
        """Until the process has stopped itself at a stall point (app/faults.py)."""
        deadline = time.monotonic() + timeout
        while psutil.Process(self.process.pid).status() != psutil.STATUS_STOPPED:
            if time.monotonic() > deadline:
                raise AssertionError(f"not stalled within {timeout} s:\n{self.output()}")
            time.sleep(0.02)

    def resume(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def start(command: str, env: Mapping[str, str], log: Path) -> HeraldProcess:
    handle = log.open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", command],
        env=dict(env),
        stdout=handle,
        stderr=subprocess.STDOUT,
        cwd=Path(__file__).parent.parent,
    )
    handle.close()
    return HeraldProcess(process, log)


@contextmanager
def running_worker(stack: Stack, log: Path, **overrides: str) -> Iterator[HeraldProcess]:
    worker = start("worker", herald_env(stack, **{**FAST_WORKER_ENV, **overrides}), log)
    try:
        worker.wait_for_log("worker.started")
        yield worker
    finally:
        worker.stop()


def crash_worker(stack: Stack, log: Path, point: str, **overrides: str) -> HeraldProcess:
    """A worker (on the recovery clocks) that dies at ``point`` the first time it gets there."""
    env = {**FAST_WORKER_ENV, **RECOVERY_ENV, **overrides, "HERALD_FAULT": point}
    return start("worker", herald_env(stack, **env), log)


async def wait_crashed(process: HeraldProcess, timeout: float = 30.0) -> None:
    code = await asyncio.to_thread(process.process.wait, timeout)
    assert code == FAULT_EXIT_CODE, process.output()


@dataclass
class ApiProcess(HeraldProcess):
    base_url: str


def start_api(stack: Stack, logs: Path, **extra: str) -> ApiProcess:
    port = free_port()
    started = start(
        "api", herald_env(stack, HERALD_PORT=str(port), **extra), logs / f"api-{port}.log"
    )
    return ApiProcess(started.process, started.log, base_url=f"http://127.0.0.1:{port}")


async def wait_healthy(api: ApiProcess, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=api.base_url, timeout=1) as http:
        while time.monotonic() < deadline:
            if api.process.poll() is not None:
                raise AssertionError(
                    f"herald api exited ({api.process.returncode})\n{api.output()}"
                )
            try:
                if (await http.get("/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError(f"herald api not healthy within {timeout} s\n{api.output()}")
