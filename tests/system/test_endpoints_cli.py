"""``herald endpoints show | test``, the operator's view of one endpoint, as real processes on
the suite's database: its configuration with every credential named and none shown, and a
signed test event through its whole path -- here to a receiver that requires a client
certificate (mutual TLS)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import httpx

from tests.fixtures.api import new_endpoint
from tests.fixtures.processes import herald_env
from tests.fixtures.receiver import running_receiver
from tests.fixtures.stack import Stack
from tests.fixtures.tls import Authority, server_context

REPO = Path(__file__).resolve().parents[2]


async def herald(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    # In a thread: the receiver answering the test event runs on this test's loop.
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "app.cli", "endpoints", *args],
        env=herald_env(stack),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_show_names_every_credential_and_test_goes_the_whole_way(
    client: httpx.AsyncClient, tenant: dict[str, str], stack: Stack, tmp_path: Path
) -> None:
    authority = Authority(tmp_path / "ca")
    certificate, key = authority.client_certificate("cli-client")
    context = server_context(authority, [], client_authority=authority)
    async with running_receiver(context) as receiver:
        endpoint = await new_endpoint(
            client,
            tenant,
            url=f"https://127.0.0.1:{receiver.port}/cli",
            secret_headers={"X-Api-Key": "cli-hidden-key"},
            tls={
                "client_certificate": certificate,
                "client_key": key,
                "ca_bundle": authority.ca_pem(),
            },
        )
        shown = await herald(stack, "show", endpoint["id"])
        tested = await herald(stack, "test", endpoint["id"])
        missing = await herald(stack, "show", "ep_01JNOSUCHENDPOINT000000000")

    assert shown.returncode == 0, shown.stderr
    facts = json.loads(shown.stdout)
    assert facts["tls"]["client_certificate"]["subject"] == "CN=cli-client"
    assert facts["secret_header_names"] == ["X-Api-Key"]
    assert "cli-hidden-key" not in shown.stdout and key.splitlines()[1] not in shown.stdout
    assert endpoint["secret"] not in shown.stdout

    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "tls          ok       presenting the client certificate CN=cli-client" in tested.stdout
    assert tested.stdout.strip().endswith("delivered")
    assert [r.client_name for r in receiver.on("/cli")] == ["cli-client"]

    assert missing.returncode == 1 and "not found" in missing.stderr
