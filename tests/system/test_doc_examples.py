"""The docs' examples, run as a reader runs them: the README's quick start, then docs/api.md and
docs/portal.md, in order, top to bottom, on one Herald -- a real `herald api` and `herald worker`
with herald-dev's settings (the admin key, loopback allowed). Each shell example runs through bash
and curl, each receiver the pages start is started as written, the Python client's example
through the client, and every answer is held to what the ``# -> ...`` line after it says. An
example marked ``<!-- not run: why -->`` is left out, and must say why."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.fixtures.doc_examples import PAGES, Block, Step, blocks, steps
from tests.fixtures.processes import free_port, running_worker, start_api, wait_healthy
from tests.fixtures.receiver import Received, Receiver, running_receiver
from tests.fixtures.stack import ADMIN, ADMIN_KEY, Stack
from tests.fixtures.waiting import eventually

# The placeholders the docs ask the reader to fill with what the last create answered.
PLACEHOLDER = re.compile(r"\b(ten|key|ep|evt|dlv|run|rdv|pts|whsec)_\.\.\.")
# Retries as slow as the default schedule's first ones: the cancel example needs a delivery
# that is still waiting for its next try when the cancel comes.
SLOW_RETRIES = {"HERALD_RETRY_SCHEDULE": "5,300,1800"}


def webhook_id(request: Received) -> str | None:
    return {name.lower(): value for name, value in request.headers.items()}.get("webhook-id")


def found_in(answer: Any, key: str, wanted: Any) -> bool:
    """Somewhere in ``answer`` ``key`` has the sketched value (a "..." string: that prefix)."""
    if isinstance(answer, list):
        return any(found_in(item, key, wanted) for item in answer)
    if not isinstance(answer, dict):
        return False
    if key in answer:
        value = answer[key]
        if isinstance(wanted, str) and "..." in wanted:
            if isinstance(value, str) and value.startswith(wanted.split("...", 1)[0]):
                return True
        elif value == wanted:
            return True
    return any(found_in(value, key, wanted) for value in answer.values())


@dataclass
class Reader:
    """Runs the examples as a reader would, on this machine's Herald and receivers."""

    api_url: str
    receiver_port: int
    closed_port: int
    key: str
    logs: Path
    ids: dict[str, str] = field(default_factory=dict)
    receiver: asyncio.subprocess.Process | None = None
    receiver_logs: list[Path] = field(default_factory=list)

    def here(self, text: str) -> str:
        """``text`` with the pages' addresses made this test's."""
        text = text.replace("localhost:8000", self.api_url.removeprefix("http://"))
        text = text.replace("127.0.0.1:9000", f"127.0.0.1:{self.receiver_port}")
        text = text.replace("http://127.0.0.1:9/", f"http://127.0.0.1:{self.closed_port}/")
        text = text.replace(".venv/bin/python", sys.executable)
        return text.replace(", 9000)", f", {self.receiver_port})")

    def command(self, text: str) -> str:
        """The page's command as this test runs it: its addresses, and its placeholders filled
        with what the last creates answered."""

        def fill(placeholder: re.Match[str]) -> str:
            prefix = placeholder.group(1)
            assert prefix in self.ids, f"{placeholder.group(0)} before anything made one"
            return self.ids[prefix]

        return PLACEHOLDER.sub(fill, self.here(text))

    async def curl(self, command: str) -> tuple[int, Any]:
        # The page's own command line, its status code written after the body.
        script = 'curl() { command curl --show-error --write-out "\\n%{http_code}" "$@"; }\n'
        ran = await asyncio.to_thread(
            subprocess.run,
            ["bash", "-c", script + command],
            env={"KEY": self.key, "ADMIN_KEY": ADMIN_KEY, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ran.returncode == 0, (command, ran.stderr)
        body, _, status = ran.stdout.rpartition("\n")
        return int(status), json.loads(body) if body else None

    async def run(self, step: Step) -> Any:
        command = self.command(step.command)
        wanted = step.status()
        sketch = Step(step.command, self.here(step.expected or "")).sketch()

        def as_said(answer: tuple[int, Any]) -> bool:
            status, body = answer
            if status != wanted if wanted is not None else status >= 300:
                return False
            return all(found_in(body, key, value) for key, value in sketch)

        if " -X " in command:
            answer = await self.curl(command)
        else:
            # A read may show where things are going: as a reader would, ask again a moment
            # later (a delivery on its way to `succeeded`, a job still running).
            answer = await eventually(lambda: self.curl(command), as_said, timeout=60, every=0.2)
        assert as_said(answer), (step.command, step.expected, answer)
        status, body = answer
        if status in (201, 202) and isinstance(body, dict) and isinstance(body.get("id"), str):
            self.ids[body["id"].split("_", 1)[0]] = body["id"]
        if isinstance(body, dict) and str(body.get("secret", "")).startswith("whsec_"):
            self.ids["whsec"] = body["secret"]
        return body

    async def start_receiver(self, block: Block) -> None:
        """The page's receiver, its command as written (on this test's port), in place of the
        one running: as a reader stops one and starts the next."""
        await self.stop_receiver()
        log = self.logs / f"receiver-{len(self.receiver_logs)}.log"
        self.receiver_logs.append(log)
        with log.open("wb") as output:
            # A session of its own: stopping it stops the Python that bash started too.
            self.receiver = await asyncio.create_subprocess_exec(
                "bash",
                "-c",
                self.command(block.text),
                stdout=output,
                stderr=output,
                start_new_session=True,
            )

        async def answers() -> bool:
            try:
                async with httpx.AsyncClient() as http:
                    await http.post(f"http://127.0.0.1:{self.receiver_port}/ping", content=b"{}")
                return True
            except httpx.ConnectError:
                return False

        assert await eventually(answers, bool, timeout=30), log.read_text()

    async def stop_receiver(self) -> None:
        if self.receiver is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.receiver.pid, signal.SIGTERM)
            await self.receiver.wait()
            self.receiver = None

    async def python_client(self, block: Block, receiver: Receiver) -> None:
        """The client example, its endpoint at a receiver that records what it gets: its last
        lines verify a request as received."""
        split = block.text.index("# In a receiver:")
        producer, in_a_receiver = block.text[:split], block.text[split:]
        producer = producer.replace("http://127.0.0.1:8000", self.api_url)
        producer = producer.replace("http://127.0.0.1:9000", receiver.url(""))
        example: dict[str, Any] = {"KEY": self.key}
        # The page's code as written (its URLs pointed here): a reader pastes it and runs it.
        await asyncio.to_thread(exec, producer, example)
        delivery = example["delivery"].id

        async def sent() -> list[Received]:
            return [r for r in receiver.requests if webhook_id(r) == delivery]

        [request] = await eventually(sent, bool, timeout=60)
        example["request"] = request
        exec(in_a_receiver, example)  # noqa: S102
        # Verified (a forged or altered one raises InvalidSignature): the body, parsed.
        assert example["payload"] == json.loads(request.body)


@asynccontextmanager
async def herald(stack: Stack, logs: Path) -> AsyncIterator[str]:
    """A `herald api` and a `herald worker` on the test stack; the API's URL."""
    api = start_api(stack, logs, **SLOW_RETRIES)
    try:
        await wait_healthy(api)
        with running_worker(stack, logs / "worker.log", **SLOW_RETRIES):
            yield api.base_url
    finally:
        api.stop()


async def test_the_docs_examples_run_top_to_bottom_as_written(stack: Stack, tmp_path: Path) -> None:
    async with (
        herald(stack, tmp_path) as api_url,
        running_receiver() as recording,
        httpx.AsyncClient(base_url=api_url) as http,
    ):
        made = await http.post("/v1/tenants", json={"name": "docs"}, headers=ADMIN)
        reader = Reader(api_url, free_port(), free_port(), made.json()["api_key"], tmp_path)
        ran = 0
        try:
            for page in PAGES:
                for block in blocks(page):
                    if block.not_run is not None:
                        assert block.not_run.strip(), f"{page}: a skipped example says why"
                    elif block.language == "sh" and "HTTPServer(" in block.text:
                        await reader.start_receiver(block)
                    elif block.language == "sh":
                        for step in steps(block):
                            await reader.run(step)
                            ran += 1
                    elif block.language == "python" and "from herald_client import" in block.text:
                        await reader.python_client(block, recording)
                        ran += 1
            # What the pages say their receivers print, they printed: the quick start's checked
            # its delivery's signature; the OAuth2 endpoint's requests carried the token the
            # stand-in token endpoint gave.
            quick_start, examples = reader.receiver_logs

            async def printed() -> str:
                return examples.read_text()

            assert "verified dlv_" in quick_start.read_text(), quick_start.read_text()
            await eventually(printed, lambda text: "'Bearer example-token'" in text, timeout=60)
        finally:
            await reader.stop_receiver()
        assert ran >= 50, f"only {ran} examples ran: has a page lost its examples?"
