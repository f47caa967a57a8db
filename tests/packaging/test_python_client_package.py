"""The Python client's wheel and its sdist, each installed into a fresh virtual environment
and used from there by a program of a user's (consumers/accept_and_read.py) against a real
Herald: a delivery accepted, then read until it was delivered."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from tests.fixtures.api import new_endpoint, new_tenant
from tests.fixtures.distributions import Dist, fresh_venv, pip_install, run_in
from tests.fixtures.receiver import Receiver
from tests.packaging.conftest import InstalledHerald

PROGRAM = (Path(__file__).parent / "consumers" / "accept_and_read.py").read_text()


@pytest.mark.parametrize("artefact", ["wheel", "sdist"])
async def test_the_installed_client_accepts_and_reads_a_delivery(
    artefact: str,
    dist: Dist,
    installed_herald: InstalledHerald,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    python = fresh_venv(tmp_path / "venv")
    pip_install(python, dist.client_wheel if artefact == "wheel" else dist.client_sdist)
    async with httpx.AsyncClient(base_url=installed_herald.api.base_url) as http:
        tenant = await new_tenant(http, f"python-{artefact}")
        endpoint = await new_endpoint(http, tenant, url=receiver.url(f"/{artefact}"))
    env = {
        "HERALD_URL": installed_herald.api.base_url,
        "HERALD_KEY": tenant["Authorization"].removeprefix("Bearer "),
        "ENDPOINT_ID": endpoint["id"],
    }
    # In a thread: the receiver answers from this test's event loop meanwhile.
    said = json.loads(await asyncio.to_thread(run_in, python, PROGRAM, env))
    assert Path(said["client"]).is_relative_to(tmp_path / "venv")  # not the checkout's
    assert said["read"] == said["accepted"] and said["state"] == "succeeded"
    [request] = receiver.on(f"/{artefact}")
    assert request.headers["webhook-id"] == said["accepted"]
