"""The server's wheel in a fresh virtual environment: `herald` runs from the installed files,
not the checkout; its API serves and its worker delivers on the test's PostgreSQL and Redis;
and the command, the API and a delivery's User-Agent say one version."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
from standardwebhooks import Webhook

from app import __version__
from tests.fixtures.api import new_endpoint, new_tenant
from tests.fixtures.distributions import REPO, away_from_checkout, run_in
from tests.fixtures.receiver import Receiver
from tests.packaging.conftest import InstalledHerald


def test_the_wheel_installs_herald_and_its_data_outside_the_checkout(
    installed_herald: InstalledHerald,
) -> None:
    python = installed_herald.bin_dir / "python"
    said = run_in(
        python,
        "import app, migrations, workers\n"
        "from app.core.migrate import alembic_config\n"
        "from importlib.metadata import metadata\n"
        "from pathlib import Path\n"
        "print(app.__file__, migrations.__file__, workers.__file__)\n"
        "m = metadata('herald-webhooks')\n"
        "print(m['Version'], m['License-Expression'])\n"
        "versions = Path(alembic_config('x').get_main_option('script_location')) / 'versions'\n"
        "print(len(list(versions.glob('*.py'))))\n",
    )
    where, metadata, migrations = said.splitlines()
    venv = installed_herald.bin_dir.parent
    assert all(Path(module).is_relative_to(venv) for module in where.split()), where
    assert metadata.split() == [__version__, "Apache-2.0"]
    assert int(migrations) == len(list((REPO / "migrations/versions").glob("*.py")))


async def test_the_installed_herald_accepts_and_delivers(
    installed_herald: InstalledHerald, receiver: Receiver
) -> None:
    async with httpx.AsyncClient(base_url=installed_herald.api.base_url) as http:
        ready = await http.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready", ready.text
        tenant = await new_tenant(http, "installed")
        endpoint = await new_endpoint(http, tenant, url=receiver.url("/installed"))
        accepted = await http.post(
            "/v1/deliveries",
            json={"endpoint_id": endpoint["id"], "event_type": "order.paid", "payload": {"n": 1}},
            headers=tenant,
        )
        assert accepted.status_code == 202, accepted.text
        [request] = await receiver.wait_for("/installed", 1)
    assert request.headers["webhook-id"] == accepted.json()["id"]
    assert Webhook(endpoint["secret"]).verify(request.body, request.headers) == {"n": 1}


async def test_the_command_the_api_and_a_delivery_say_one_version(
    installed_herald: InstalledHerald, receiver: Receiver
) -> None:
    def version(*command: str, cwd: Path) -> str:
        ran = subprocess.run(
            command, cwd=cwd, env=away_from_checkout(), capture_output=True, text=True, check=True
        )
        return ran.stdout

    from_checkout = version(sys.executable, "-m", "app.cli", "--version", cwd=REPO)
    installed = version(str(installed_herald.bin_dir / "herald"), "--version", cwd=Path("/"))
    assert from_checkout == installed == f"herald {__version__}\n"
    async with httpx.AsyncClient(base_url=installed_herald.api.base_url) as http:
        health = (await http.get("/healthz")).json()
        tenant = await new_tenant(http, "versions")
        endpoint = await new_endpoint(http, tenant, url=receiver.url("/version"))
        await http.post(
            "/v1/deliveries",
            json={"endpoint_id": endpoint["id"], "event_type": "v.x", "payload": {}},
            headers=tenant,
        )
        [request] = await receiver.wait_for("/version", 1)
    assert health == {"status": "ok", "version": __version__}
    assert request.headers["User-Agent"] == f"Herald/{__version__}"
