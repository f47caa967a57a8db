"""Packaging tests: what `make dist` builds, installed into fresh environments and projects as a
user installs it, and run against a real Herald -- itself run from the installed server wheel.

Every test here starts with empty tables and an empty Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.distributions import (
    Dist,
    fresh_venv,
    make_dist,
    pip_install,
    start_installed,
    start_installed_api,
)
from tests.fixtures.processes import FAST_WORKER_ENV, ApiProcess, herald_env, wait_healthy
from tests.fixtures.stack import Stack


@pytest.fixture(autouse=True)
def _starts_clean(clean_slate: None) -> None:
    pass


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """One `make dist` for the session."""
    return make_dist(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session")
def server_venv(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the server's wheel installed; its bin/."""
    python = fresh_venv(tmp_path_factory.mktemp("server") / "venv")
    pip_install(python, dist.server_wheel)
    return python.parent


@dataclass(frozen=True)
class InstalledHerald:
    api: ApiProcess
    bin_dir: Path


@pytest.fixture(scope="module")
async def installed_herald(
    server_venv: Path, stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[InstalledHerald]:
    """`herald api` and `herald worker` from the installed wheel, on the test stack: for the
    module only, so that no worker of it is left to take other tests' deliveries."""
    logs = tmp_path_factory.mktemp("installed-herald")
    api = start_installed_api(server_venv, stack, logs)
    worker = start_installed(
        server_venv, "worker", herald_env(stack, **FAST_WORKER_ENV), logs / "worker.log"
    )
    try:
        await wait_healthy(api)
        await asyncio.to_thread(worker.wait_for_log, "worker.started")
        yield InstalledHerald(api, server_venv)
    finally:
        worker.stop()
        api.stop()
