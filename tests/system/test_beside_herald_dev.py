"""A `herald` started by hand beside a running `herald-dev`: the dev stack's admin key and its SSRF
allowlist are settings of its own processes, so a plain `herald worker` takes the stack's work
and lets it die as destination_blocked, and a plain `herald api` answers 401 to the admin key.
The banner prints the command line that gives such a process the stack's settings, and
`herald reconcile` says why a key is refused. Real processes: herald-dev with its embedded
servers, workers and APIs beside it, a receiver on 127.0.0.1."""

from __future__ import annotations

import contextlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

from tests.fixtures.processes import (
    ApiProcess,
    HeraldProcess,
    clean_env,
    free_port,
    start,
    wait_healthy,
)
from tests.fixtures.receiver import running_receiver
from tests.fixtures.waiting import eventually

REPO = Path(__file__).resolve().parents[2]
BANNER_END = "Press Ctrl-C to stop."
URLS = ("HERALD_DATABASE_URL", "HERALD_REDIS_URL")


@dataclass
class Dev:
    process: subprocess.Popen[bytes]
    banner: str
    base_url: str

    def said(self, label: str) -> str:
        found = re.search(rf"{label}:\s*(\S+)", self.banner)
        assert found, self.banner
        return found.group(1)

    def command_line(self) -> str:
        """The banner's command line for a process beside the stack, as printed."""
        found = re.search(r"Start one so:\n(.*?)\n" + re.escape(BANNER_END), self.banner, re.S)
        assert found, f"the banner gives no command line:\n{self.banner}"
        return found.group(1)

    def settings(self) -> dict[str, str]:
        """The NAME=value words of that command line."""
        words = shlex.split(self.command_line())
        return dict(word.split("=", 1) for word in words if "=" in word)

    def own_worker(self) -> Any:
        [worker] = [
            child
            for child in psutil.Process(self.process.pid).children()
            if child.cmdline()[-2:] == ["app.cli", "worker"]
        ]
        return worker


@contextlib.contextmanager
def herald_dev(logs: Path) -> Iterator[Dev]:
    # Short, so that the embedded servers' unix sockets fit.
    data_dir = Path(tempfile.mkdtemp(prefix="hd-")).resolve()
    port = free_port()
    out = logs / "herald-dev.out"
    with out.open("wb") as stdout, (logs / "herald-dev.err").open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "devstack.cli"],
            cwd=REPO,
            env=clean_env(HERALD_DATA_DIR=str(data_dir), HERALD_PORT=str(port)),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 120
        while BANNER_END not in (banner := out.read_text(errors="replace")):
            assert process.poll() is None, f"herald-dev exited:\n{banner}"
            assert time.monotonic() < deadline, f"no banner:\n{banner}"
            time.sleep(0.1)
        yield Dev(process, banner, f"http://127.0.0.1:{port}")
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(data_dir, ignore_errors=True)


def beside(command_line: str, log: Path) -> HeraldProcess:
    """A command line run as a reader pastes it into a shell."""
    handle = log.open("ab")
    process = subprocess.Popen(
        ["bash", "-c", command_line], cwd=REPO, env=clean_env(), stdout=handle, stderr=handle
    )
    handle.close()
    return HeraldProcess(process, log)


def reconcile(env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "reconcile"],
        env=clean_env(**env),
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


async def deliver_once(dev: Dev, endpoint_url: str) -> dict[str, Any]:
    """A delivery through the stack's API to ``endpoint_url``; the delivery once it is done."""
    tenant = {"Authorization": f"Bearer {dev.said('dev tenant API key')}"}
    async with httpx.AsyncClient(base_url=dev.base_url, headers=tenant) as http:
        endpoint = await http.post("/v1/endpoints", json={"url": endpoint_url})
        assert endpoint.status_code == 201, endpoint.text
        intent = {"endpoint_id": endpoint.json()["id"], "event_type": "dev.tried", "payload": {}}
        accepted = await http.post("/v1/deliveries", json=intent)
        assert accepted.status_code == 202, accepted.text

        async def now() -> dict[str, Any]:
            answer: dict[str, Any] = (
                await http.get(f"/v1/deliveries/{accepted.json()['id']}")
            ).json()
            return answer

        return await eventually(now, lambda d: d["state"] in ("succeeded", "dead"), timeout=60)


async def test_a_process_beside_herald_dev_works_with_the_settings_its_banner_prints(
    tmp_path: Path,
) -> None:
    with herald_dev(tmp_path) as dev:
        urls = {name: dev.settings()[name] for name in URLS}
        # Only the worker under test may take work: herald-dev's own is stopped meanwhile.
        own_worker = dev.own_worker()
        own_worker.suspend()
        try:
            keyless = start("worker", clean_env(**urls), tmp_path / "keyless-worker.log")
            # What the banner warns of first: without the key ring a worker does not start.
            assert keyless.process.wait(timeout=60) == 2
            assert "HERALD_SECRET_KEYS is not set" in keyless.output()
            ring = {"HERALD_SECRET_KEYS": dev.settings()["HERALD_SECRET_KEYS"]}
            async with running_receiver() as receiver:
                plain = start("worker", clean_env(**urls, **ring), tmp_path / "plain-worker.log")
                try:
                    plain.wait_for_log("worker.started")
                    blocked = await deliver_once(dev, receiver.url("/plain"))
                finally:
                    plain.stop()
                # What the banner warns of: loopback is herald-dev's allowlist, not the worker's.
                assert blocked["state"] == "dead"
                assert blocked["dead_reason"].startswith("destination_blocked")

                worker = beside(dev.command_line(), tmp_path / "banner-worker.log")
                try:
                    worker.wait_for_log("worker.started")
                    sent = await deliver_once(dev, receiver.url("/banner"))
                finally:
                    worker.stop()
                assert sent["state"] == "succeeded", sent
                assert len(receiver.on("/banner")) == 1 and receiver.on("/plain") == []
        finally:
            own_worker.resume()

        # An API started beside it: herald-dev's admin key is its own API's bootstrap key.
        admin = dev.said("admin API key")
        plain_port = free_port()
        plain_api = start(
            "api",
            clean_env(**urls, **ring, HERALD_PORT=str(plain_port)),
            tmp_path / "plain-api.log",
        )
        try:
            plain_url = f"http://127.0.0.1:{plain_port}"
            await wait_healthy(ApiProcess(plain_api.process, plain_api.log, plain_url))
            refused = reconcile({"HERALD_API_URL": plain_url, "HERALD_ADMIN_API_KEY": admin})
        finally:
            plain_api.stop()
        assert refused.returncode == 1
        assert "does not know this admin key (401)" in refused.stderr
        assert "`herald keys create --admin`" in refused.stderr
        assert admin not in refused.stderr  # the key itself is never repeated

        port = free_port()
        # The same command line for an API, on a port of its own.
        settings, _ = dev.command_line().rsplit(" worker", 1)
        api = beside(f"HERALD_PORT={port} {settings} api", tmp_path / "banner-api.log")
        try:
            await wait_healthy(ApiProcess(api.process, api.log, f"http://127.0.0.1:{port}"))
            target = {"HERALD_API_URL": f"http://127.0.0.1:{port}"}
            taken = reconcile({**target, "HERALD_ADMIN_API_KEY": admin})
            tenant_key = reconcile(
                {**target, "HERALD_ADMIN_API_KEY": dev.said("dev tenant API key")}
            )
        finally:
            api.stop()
        assert taken.returncode == 0, taken.stderr
        assert tenant_key.returncode == 1
        assert "it is a tenant's (403)" in tenant_key.stderr
