"""The TypeScript client (clients/typescript) against a real `herald api` and `herald worker`:
its own tests, run by Node's test runner, and one keyed accept through a database outage."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.fixtures.api import new_endpoint, new_tenant
from tests.fixtures.processes import running_worker, start_api, wait_healthy
from tests.fixtures.stack import ADMIN_KEY, OwnPostgres, Stack
from tests.fixtures.waiting import count_rows

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "typescript"
NPM = shutil.which("npm") or "npm"


def node_env(**extra: str) -> dict[str, str]:
    # npm keeps its cache and logs under HOME: the test's, never the checkout.
    home = os.environ.get("TMPDIR", "/tmp")
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, **extra}


@pytest.fixture(scope="module")
def built() -> Path:
    assert (PACKAGE / "node_modules").is_dir(), (
        "no clients/typescript/node_modules: `make test` runs npm ci there"
    )
    subprocess.run([NPM, "run", "build"], cwd=PACKAGE, env=node_env(), check=True, timeout=300)
    return PACKAGE / "dist"


async def test_the_typescript_clients_own_tests_pass_against_a_real_herald(
    built: Path, stack: Stack, tmp_path: Path
) -> None:
    api = start_api(stack, tmp_path)
    try:
        await wait_healthy(api)
        with running_worker(stack, tmp_path / "worker.log"):
            ran = await asyncio.create_subprocess_exec(
                "node",
                "--test",
                str(built / "test"),
                cwd=PACKAGE,
                env=node_env(HERALD_URL=api.base_url, HERALD_ADMIN_KEY=ADMIN_KEY),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            output, _ = await asyncio.wait_for(ran.communicate(), timeout=300)
    finally:
        api.stop()
    said = output.decode()
    assert ran.returncode == 0, said
    assert "# fail 0" in said and "# pass 9" in said, said


async def test_a_keyed_accept_retried_through_an_outage_makes_one_delivery(
    built: Path, own_postgres: OwnPostgres, tmp_path: Path
) -> None:
    api = start_api(own_postgres.stack, tmp_path)
    try:
        await wait_healthy(api)
        async with httpx.AsyncClient(base_url=api.base_url) as http:
            tenant = await new_tenant(http, "ts-outage")
            endpoint = await new_endpoint(http, tenant, url="http://127.0.0.1:9/outage")
        await asyncio.to_thread(own_postgres.server.stop)
        script = await asyncio.create_subprocess_exec(
            "node",
            str(built / "scripts" / "outage.js"),
            env=node_env(
                HERALD_URL=api.base_url,
                HERALD_KEY=tenant["Authorization"].removeprefix("Bearer "),
                ENDPOINT_ID=endpoint["id"],
            ),
            stdout=asyncio.subprocess.PIPE,
        )
        assert script.stdout is not None
        first = await asyncio.wait_for(script.stdout.readline(), timeout=60)
        assert first.decode().strip() == "status 503"  # met the outage
        assert await asyncio.to_thread(own_postgres.server.start)
        await own_postgres.engine.dispose()
        rest, _ = await asyncio.wait_for(script.communicate(), timeout=120)
    finally:
        api.stop()
    assert script.returncode == 0
    outcome = json.loads(rest.decode().strip().splitlines()[-1])
    statuses = [status for status, _ in outcome["seen"]]
    assert statuses[0] == 503 and statuses[-1] == 202 and set(statuses) <= {503, 202}
    assert len({key for _, key in outcome["seen"]}) == 1  # every try carried one key
    assert await count_rows(own_postgres.engine, "deliveries") == 1
    assert (
        await count_rows(own_postgres.engine, "deliveries", "id = :d", d=outcome["delivery"]) == 1
    )
