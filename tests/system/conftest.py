"""System tests: real Herald processes (workers, crash points, herald-dev).

Every test here starts with empty tables and an empty Redis."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fixtures.processes import HeraldProcess, running_worker
from tests.fixtures.stack import Stack


@pytest.fixture(autouse=True)
def _starts_clean(clean_slate: None) -> None:
    pass


@pytest.fixture(scope="module")
def worker(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeraldProcess]:
    """A `herald worker` process (FAST_WORKER_ENV's short clocks), shared by a module's tests."""
    with running_worker(stack, tmp_path_factory.mktemp("worker") / "worker.log") as process:
        yield process
