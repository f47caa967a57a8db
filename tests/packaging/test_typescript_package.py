"""The TypeScript client as a user installs it into a fresh npm project -- from the tarball
`make dist` builds, and from the client's folder as a clone has it (npm builds it there) --
then used by an ES module and a CommonJS module of the user's (consumers/accept_and_read.mts
and .cts): type-checked against the package's types, run by Node against a real Herald."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.fixtures.api import new_endpoint, new_tenant
from tests.fixtures.distributions import REPO, Dist, outside_make
from tests.fixtures.receiver import Receiver
from tests.packaging.conftest import InstalledHerald

PACKAGE = REPO / "clients" / "typescript"
CONSUMERS = Path(__file__).parent / "consumers"
NPM = shutil.which("npm") or "npm"
# The client's own compiler and Node's types, from its lockfile (`make test` runs npm ci there).
TOOLS = PACKAGE / "node_modules"


def npm_env() -> dict[str, str]:
    # npm's cache is the user's: where `make test`'s npm ci put the client's tools, which an
    # install from the folder installs there again, without the network.
    quiet = {"audit": "false", "fund": "false", "update_notifier": "false"}
    return {
        **outside_make(),
        "npm_config_prefer_offline": "true",
        **{f"npm_config_{name}": value for name, value in quiet.items()},
    }


def run(*command: str, cwd: Path) -> None:
    ran = subprocess.run(
        command, cwd=cwd, env=npm_env(), capture_output=True, text=True, check=False, timeout=600
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr


def clone_of_the_client(into: Path) -> Path:
    """The client's folder as a fresh clone has it: neither node_modules nor dist."""
    copy = into / "typescript"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("node_modules", "dist"))
    return copy


@pytest.fixture(scope="module", params=["tarball", "folder"])
def project(
    request: pytest.FixtureRequest, dist: Dist, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A fresh npm project with the client installed the param's way, and the user's two
    modules compiled by TypeScript against the installed package's types."""
    root = tmp_path_factory.mktemp(f"npm-{request.param}")
    project = root / "project"
    project.mkdir()
    (project / "package.json").write_text(json.dumps({"name": "a-project", "private": True}))
    source = dist.npm_tarball if request.param == "tarball" else clone_of_the_client(root)
    run(NPM, "install", str(source), cwd=project)
    for module in ("accept_and_read.mts", "accept_and_read.cts"):
        shutil.copy(CONSUMERS / module, project / module)
    run(
        str(TOOLS / ".bin" / "tsc"),
        *("--strict", "--target", "es2022", "--module", "nodenext"),
        *("--types", "node", "--typeRoots", str(TOOLS / "@types"), "--outDir", "out"),
        "accept_and_read.mts",
        "accept_and_read.cts",
        cwd=project,
    )
    return project


@pytest.mark.parametrize(
    ("module", "build"),
    [("accept_and_read.mjs", "dist/src/index.js"), ("accept_and_read.cjs", "dist/cjs/index.js")],
    ids=["esm", "commonjs"],
)
async def test_a_module_on_the_installed_client_accepts_and_reads_a_delivery(
    project: Path, module: str, build: str, installed_herald: InstalledHerald, receiver: Receiver
) -> None:
    async with httpx.AsyncClient(base_url=installed_herald.api.base_url) as http:
        tenant = await new_tenant(http, f"typescript-{module}")
        endpoint = await new_endpoint(http, tenant, url=receiver.url(f"/{module}"))
    ran = await asyncio.create_subprocess_exec(
        "node",
        str(project / "out" / module),
        cwd=project,
        env={
            **npm_env(),
            "HERALD_URL": installed_herald.api.base_url,
            "HERALD_KEY": tenant["Authorization"].removeprefix("Bearer "),
            "ENDPOINT_ID": endpoint["id"],
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(ran.communicate(), timeout=120)
    assert ran.returncode == 0, output.decode()
    said = json.loads(output.decode().strip().splitlines()[-1])
    assert said["read"] == said["accepted"] and said["state"] == "succeeded"
    assert said["resolved"].endswith(f"/{build}")  # (from a folder: the folder itself)
    [request] = receiver.on(f"/{module}")
    assert request.headers["webhook-id"] == said["accepted"]
