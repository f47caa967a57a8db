"""The portal's "verify your webhooks" code, as the page shows it, run against a real delivery:
the Python one in this interpreter, the Node one by `node`. Each accepts what Herald sent and
refuses it with one byte of the body changed."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
from html import unescape
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.fixtures.api import new_endpoint, portal_bearer
from tests.fixtures.engine import pump
from tests.fixtures.receiver import Receiver
from tests.fixtures.waiting import wait_state


def shown(page: str, language: str) -> str:
    found = re.search(rf'<pre id="verify-{language}"[^>]*><code>(.*?)</code></pre>', page, re.S)
    assert found, f"no {language} snippet on the page"
    return unescape(found.group(1))


async def delivered(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> tuple[dict[str, Any], str, dict[str, str], bytes]:
    """An endpoint of customer acme, one delivery sent to it: the endpoint, the portal's page
    of it, and the request's headers and body as the receiver got them."""
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/signed"), customer_id="acme")
    accepted = await client.post(
        "/v1/deliveries",
        json={"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {"note": "naïve ✓"}},
        headers=tenant,
    )
    async with pump(settings, engine) as (running, _):
        running.start()
        await wait_state(engine, accepted.json()["id"], "succeeded")
    [sent] = receiver.on("/signed")
    bearer = await portal_bearer(client, tenant, "acme")
    page = await client.get(f"/portal/api/endpoints/{endpoint['id']}", headers=bearer)
    headers = {name.lower(): value for name, value in sent.headers.items()}
    return endpoint, page.text, headers, sent.body


async def test_the_python_snippet_verifies_a_real_delivery(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    endpoint, page, headers, body = await delivered(client, tenant, receiver, settings, engine)
    scope: dict[str, Any] = {}
    exec(shown(page, "python"), scope)  # noqa: S102 -- the page's own code, under test
    verify = scope["verify"]
    assert verify(endpoint["secret"], headers, body) is True
    assert verify(endpoint["secret"], headers, body[:-1] + b" ") is False
    assert verify("whsec_" + base64.b64encode(b"another key").decode(), headers, body) is False


async def test_the_node_snippet_verifies_a_real_delivery(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    node = shutil.which("node")
    assert node is not None, "Node.js is part of the machine (README): the snippet needs it"
    endpoint, page, headers, body = await delivered(client, tenant, receiver, settings, engine)
    script = tmp_path / "verify.js"
    script.write_text(
        shown(page, "node")
        + "\nconst input = JSON.parse(require('node:fs').readFileSync(0, 'utf8'));"
        + "\nconsole.log(JSON.stringify(input.cases.map((c) =>"
        + " verify(input.secret, input.headers, Buffer.from(c, 'base64')))));\n"
    )
    cases = [body, body[:-1] + b" "]
    given = {
        "secret": endpoint["secret"],
        "headers": headers,
        "cases": [base64.b64encode(c).decode() for c in cases],
    }
    process = await asyncio.create_subprocess_exec(
        node,
        str(script),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate(json.dumps(given).encode())
    assert process.returncode == 0, err.decode()
    assert json.loads(out) == [True, False]
