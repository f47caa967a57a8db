"""Real processes: `herald-dev` starts and stops without orphans, a crash at a fault point loses
the whole transaction, and the `herald` CLI does what it prints.

Nothing here is mocked: each test runs ``python -m app.cli ...`` as a child process and looks at
the operating system's process table (tests/fixtures/dev_stack.py) and at the database
afterwards.
"""

from __future__ import annotations

import asyncio
import functools
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.faults import FAULT_EXIT_CODE
from tests.fixtures.api import wakeups_written
from tests.fixtures.dev_stack import (
    DevHarness,
    DevRun,
    describe,
    herald_command,
    is_postgres,
    is_redis,
    stop_process,
)
from tests.fixtures.processes import clean_env, herald_env, start_api, wait_healthy
from tests.fixtures.receiver import Receiver
from tests.fixtures.stack import ADMIN, Stack
from tests.fixtures.waiting import count_rows

REPO = Path(__file__).resolve().parents[2]
NOT_FINISHED = ("pending", "enqueued", "leased")


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# --- herald-dev ---------------------------------------------------------------------------------


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[DevHarness]:
    # Short, so the unix sockets (and so the servers' command lines) live inside the data dir.
    data_dir = Path(tempfile.mkdtemp(prefix="hd-")).resolve()
    harness = DevHarness(data_dir, tmp_path)
    try:
        yield harness
    finally:
        harness.close()
        shutil.rmtree(data_dir, ignore_errors=True)


def use_the_api(run: DevRun) -> str:
    """Endpoint, delivery intent and admin call through the running service; the delivery id."""
    tenant = bearer(run.tenant_key)
    with httpx.Client(base_url=run.base_url, timeout=10) as http:
        endpoint = http.post(
            "/v1/endpoints", json={"url": "http://127.0.0.1:9/hook"}, headers=tenant
        )
        assert endpoint.status_code == 201, endpoint.text
        intent = {
            "endpoint_id": endpoint.json()["id"],
            "event_type": "test.ping",
            "payload": {"hello": "world"},
        }
        accepted = http.post("/v1/deliveries", json=intent, headers=tenant)
        assert accepted.status_code == 202, accepted.text
        assert accepted.json()["state"] == "pending"
        delivery_id: str = accepted.json()["id"]
        fetched = http.get(f"/v1/deliveries/{delivery_id}", headers=tenant)
        assert fetched.status_code == 200, fetched.text
        # `herald-dev` runs a worker too, which may already have picked it up; nothing listens
        # on port 9, so it cannot have succeeded, and one refused attempt is far from dead.
        assert fetched.json()["state"] in NOT_FINISHED, fetched.text
        created = http.post(
            "/v1/tenants", json={"name": "made-by-admin"}, headers=bearer(run.admin_key)
        )
        assert created.status_code == 201, created.text
    return delivery_id


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_dev_serves_stops_everything_on_signal_and_restarts_on_its_data(
    dev: DevHarness, stop_signal: signal.Signals
) -> None:
    first = dev.start("first")
    dev.assert_servers_running(first)
    delivery_id = use_the_api(first)

    assert dev.stop(first, stop_signal) == 0, first.output()
    dev.assert_nothing_left(first)

    second = dev.start("second")
    assert (second.tenant_key, second.admin_key) == (first.tenant_key, first.admin_key)
    dev.assert_servers_running(second)
    with httpx.Client(base_url=second.base_url, timeout=10) as http:
        again = http.get(f"/v1/deliveries/{delivery_id}", headers=bearer(second.tenant_key))
    assert again.status_code == 200, again.text
    assert again.json()["id"] == delivery_id

    assert dev.stop(second, stop_signal) == 0, second.output()
    dev.assert_nothing_left(first, second)


def test_dev_starts_over_the_servers_a_killed_supervisor_left_and_then_stops_them(
    dev: DevHarness,
) -> None:
    first = dev.start("first")
    dev.assert_servers_running(first)
    first.process.kill()
    assert first.process.wait(10) == -signal.SIGKILL

    # Its Herald children are told to stop (PR_SET_PDEATHSIG); the embedded servers outlive it
    # by design, for the next `herald-dev` to take over.
    herald = [p for p in first.started if herald_command(p) is not None]
    assert herald, describe(first.started)
    _, still_alive = psutil.wait_procs(herald, timeout=30)
    assert still_alive == [], f"orphaned by the killed supervisor:\n{describe(still_alive)}"
    left = dev.servers()
    assert any(map(is_postgres, left)) and any(map(is_redis, left)), describe(left)

    second = dev.start("second")
    assert (second.tenant_key, second.admin_key) == (first.tenant_key, first.admin_key)
    dev.assert_servers_running(second)
    use_the_api(second)

    assert dev.stop(second, signal.SIGTERM) == 0, second.output()
    dev.assert_nothing_left(first, second)


# --- herald api with a fault injected ---------------------------------------------------------


def wait_exit(process: subprocess.Popen[bytes], timeout: float) -> int | None:
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


def test_keys_create_and_purge_work_against_the_dev_stack_with_no_urls_set(
    dev: DevHarness,
) -> None:
    env = clean_env(HERALD_DATA_DIR=str(dev.data_dir))
    running = dev.start("first")

    created = run_cli(env, "keys", "create", "--tenant", "acme", program=DEV_CLI)
    assert created.returncode == 0, created.stderr
    [key] = created.stdout.splitlines()
    with httpx.Client(base_url=running.base_url, timeout=10) as http:
        assert http.get("/v1/endpoints", headers=bearer(key)).status_code == 200
    purged = run_cli(env, "purge", program=DEV_CLI)
    assert purged.returncode == 0, purged.stderr
    assert "purged_deliveries=" in purged.stdout
    dev.assert_servers_running(running)  # still its servers, untouched
    assert dev.stop(running, signal.SIGTERM) == 0, running.output()

    # With `herald-dev` stopped, the command starts the data dir's database and stops it again.
    later = run_cli(env, "keys", "create", "--tenant", "acme", program=DEV_CLI)
    assert later.returncode == 0, later.stderr
    assert dev.servers() == [], describe(dev.servers())
    again = dev.start("second")
    with httpx.Client(base_url=again.base_url, timeout=10) as http:
        assert http.get("/v1/endpoints", headers=bearer(later.stdout.strip())).status_code == 200
    assert dev.stop(again, signal.SIGTERM) == 0, again.output()
    dev.assert_nothing_left(running, again)


def test_keys_create_with_no_urls_and_no_dev_stack_says_what_to_do(tmp_path: Path) -> None:
    env = clean_env(HERALD_DATA_DIR=str(tmp_path / "never-used"))
    result = run_cli(env, "keys", "create", "--tenant", "acme", program=DEV_CLI)
    assert result.returncode != 0 and result.stdout == ""
    assert "herald-dev" in result.stderr and "HERALD_DATABASE_URL" in result.stderr


def test_dev_help_prints_what_it_runs_and_an_unknown_command_is_refused(tmp_path: Path) -> None:
    env = clean_env(HERALD_DATA_DIR=str(tmp_path / "never-used"))
    helped = run_cli(env, "--help", program=DEV_CLI)
    assert helped.returncode == 0 and "herald-dev keys create" in helped.stdout, helped.stderr
    refused = run_cli(env, "serve", program=DEV_CLI)
    assert refused.returncode == 2 and refused.stdout == ""
    assert "herald-dev keys create" in refused.stderr
    assert not (tmp_path / "never-used").exists()


ONE_OFF = [["keys", "create", "--tenant", "acme"], ["purge"], ["migrate"]]


@pytest.mark.parametrize("command", ONE_OFF)
def test_the_product_cli_never_reaches_for_the_dev_stack(
    tmp_path: Path, command: list[str]
) -> None:
    # `herald` without HERALD_DATABASE_URL names the setting and the dev tool; it starts nothing.
    env = clean_env(HERALD_DATA_DIR=str(tmp_path / "data"))
    result = run_cli(env, *command)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert "HERALD_DATABASE_URL" in result.stderr and "herald-dev" in result.stderr
    assert not (tmp_path / "data").exists()


async def test_dev_with_its_port_taken_says_so_before_starting_anything(
    dev: DevHarness, receiver: Receiver
) -> None:
    # Something else holds the port and answers 200 to everything, /readyz included.
    env = clean_env(HERALD_DATA_DIR=str(dev.data_dir), HERALD_PORT=str(receiver.port))
    result = await asyncio.to_thread(functools.partial(run_cli, env, program=DEV_CLI))

    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert f"port {receiver.port}" in output and "HERALD_PORT" in output, output
    assert "Herald is running" not in output and "hrk_" not in output, output
    assert not (dev.data_dir / "postgres").exists()  # nothing was started
    assert dev.servers() == []


async def test_crash_before_commit_drops_the_request_and_writes_nothing(
    stack: Stack, engine: AsyncEngine, tmp_path: Path
) -> None:
    crashing = start_api(stack, tmp_path, HERALD_FAULT="api.before_commit")
    try:
        await wait_healthy(crashing)
        async with httpx.AsyncClient(base_url=crashing.base_url, timeout=30) as http:
            created = await http.post("/v1/tenants", json={"name": "crashy"}, headers=ADMIN)
            assert created.status_code == 201, created.text
            tenant = bearer(created.json()["api_key"])
            endpoint = await http.post(
                "/v1/endpoints", json={"url": "http://127.0.0.1:9/hook"}, headers=tenant
            )
            assert endpoint.status_code == 201, endpoint.text
            intent = {
                "endpoint_id": endpoint.json()["id"],
                "event_type": "test.ping",
                "payload": {"hello": "world"},
            }
            # The connection closes with no response at all: no status code to misread.
            with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
                await http.post("/v1/deliveries", json=intent, headers=tenant)
        status = await asyncio.to_thread(wait_exit, crashing.process, 30)
        assert status == FAULT_EXIT_CODE, crashing.output()
        assert "fault injected at api.before_commit" in crashing.output()
    finally:
        await asyncio.to_thread(stop_process, crashing.process)

    # The tenant and endpoint committed, so this is the database that process wrote to...
    assert await count_rows(engine, "tenants") == 1
    assert await count_rows(engine, "endpoints") == 1
    # ...and of the intent's transaction nothing survived.
    for table in ("deliveries", "outbox_wakeups", "events"):
        assert await count_rows(engine, table) == 0, table

    # Control: the same request to the same API without the fault is accepted and is visible.
    healthy = start_api(stack, tmp_path)
    try:
        await wait_healthy(healthy)
        async with httpx.AsyncClient(base_url=healthy.base_url, timeout=30) as http:
            accepted = await http.post("/v1/deliveries", json=intent, headers=tenant)
        assert accepted.status_code == 202, accepted.text
        assert await count_rows(engine, "deliveries") == 1
        assert await wakeups_written(engine) == 1
        assert await count_rows(engine, "events") == 1
        healthy.process.terminate()
        # uvicorn re-raises the SIGTERM it handled once it has shut down gracefully.
        status = await asyncio.to_thread(wait_exit, healthy.process, 30)
        assert status in (0, -signal.SIGTERM), healthy.output()
        assert "Application shutdown complete" in healthy.output()
    finally:
        await asyncio.to_thread(stop_process, healthy.process)


# --- the herald CLI ---------------------------------------------------------------------------


HERALD_CLI, DEV_CLI = "app.cli", "devstack.cli"


def run_cli(
    env: dict[str, str], *args: str, program: str = HERALD_CLI
) -> subprocess.CompletedProcess[str]:
    """``herald`` (or ``herald-dev`` with ``program=DEV_CLI``) with these arguments."""
    return subprocess.run(
        [sys.executable, "-m", program, *args],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def printed_key(stack: Stack, *args: str) -> str:
    result = await asyncio.to_thread(run_cli, herald_env(stack), "keys", "create", *args)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hrk_"), result.stdout
    return lines[0]


async def test_keys_create_for_a_tenant_prints_a_key_that_authenticates_tenant_routes(
    stack: Stack, client: httpx.AsyncClient
) -> None:
    unknown = await client.get("/v1/endpoints", headers=bearer("hrk_not-a-real-key"))
    assert unknown.status_code == 401

    key = await printed_key(stack, "--tenant", "cli-tenant")

    listed = await client.get("/v1/endpoints", headers=bearer(key))
    assert listed.status_code == 200, listed.text
    not_admin = await client.post("/v1/tenants", json={"name": "nope"}, headers=bearer(key))
    assert not_admin.status_code == 403


async def test_keys_create_admin_prints_a_key_that_can_create_tenants(
    stack: Stack, client: httpx.AsyncClient
) -> None:
    key = await printed_key(stack, "--admin")

    created = await client.post("/v1/tenants", json={"name": "by-cli-admin"}, headers=bearer(key))
    assert created.status_code == 201, created.text


async def test_api_with_a_non_numeric_port_exits_2_naming_the_variable(stack: Stack) -> None:
    result = await asyncio.to_thread(run_cli, herald_env(stack, HERALD_PORT="abc"), "api")
    assert result.returncode == 2, result.stderr
    assert "HERALD_PORT" in result.stderr
