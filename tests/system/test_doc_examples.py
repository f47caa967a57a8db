"""The README's examples, run as a reader runs them: in order, top to bottom, on one Herald -- a
real `herald api` and `herald worker` with herald-dev's settings (the admin key, loopback
allowed) -- each shell example through bash and curl, the Python one through the client, and
every answer held to what the README's ``# -> ...`` line after it says comes back."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.fixtures.processes import free_port, running_worker, start_api, wait_healthy
from tests.fixtures.receiver import Received, Receiver, running_receiver
from tests.fixtures.stack import ADMIN, Stack
from tests.fixtures.waiting import eventually

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
# The placeholders the README asks the reader to fill with the id the last create answered.
PLACEHOLDER = re.compile(r"\b(ten|key|ep|evt|dlv|run|rdv)_\.\.\.")
# "key": value pairs of an expectation sketch; a string with "..." is a prefix ("ep_...").
SKETCHED = re.compile(r'"(\w+)": ("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|true|false|null)')
# Retries as slow as the default schedule's first ones: the cancel example needs a delivery
# that is still waiting for its next try when the cancel comes.
SLOW_RETRIES = {"HERALD_RETRY_SCHEDULE": "5,300,1800"}


def fenced(language: str, containing: str) -> list[str]:
    """The README's code blocks of ``language`` that contain ``containing``, in order."""
    blocks = re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.MULTILINE | re.DOTALL)
    return [block for block in blocks if containing in block]


@dataclass
class Step:
    command: str
    expected: str | None = None

    def status(self) -> int | None:
        if self.expected is None:
            return None
        found = re.match(r"(\d{3})\b", self.expected)
        return int(found.group(1)) if found else None

    def sketch(self) -> list[tuple[str, Any]]:
        return [(key, json.loads(value)) for key, value in SKETCHED.findall(self.expected or "")]


def steps(block: str) -> Iterator[Step]:
    """Each ``curl`` command (indented lines continue it) and the ``# -> `` line after it."""
    step: Step | None = None
    for line in block.splitlines():
        if line.startswith("curl "):
            if step is not None:
                yield step
            step = Step(line)
        elif step is not None and line.startswith("# -> "):
            step.expected = line.removeprefix("# -> ")
        elif step is not None and step.expected is None and line.startswith(" "):
            step.command += "\n" + line
    if step is not None:
        yield step


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
    """Runs the examples as a reader would, on this machine's Herald and receiver."""

    api_url: str
    receiver_url: str
    closed_port: int
    key: str
    ids: dict[str, str] = field(default_factory=dict)

    def command(self, text: str) -> str:
        text = text.replace("localhost:8000", self.api_url.removeprefix("http://"))
        text = text.replace("http://127.0.0.1:9000", self.receiver_url)
        text = text.replace("http://127.0.0.1:9/", f"http://127.0.0.1:{self.closed_port}/")

        def fill(placeholder: re.Match[str]) -> str:
            prefix = placeholder.group(1)
            assert prefix in self.ids, f"{placeholder.group(0)} before anything made one"
            return self.ids[prefix]

        return PLACEHOLDER.sub(fill, text)

    async def curl(self, command: str) -> tuple[int, Any]:
        # The README's own command line, its status code written after the body.
        script = 'curl() { command curl --show-error --write-out "\\n%{http_code}" "$@"; }\n'
        ran = await asyncio.to_thread(
            subprocess.run,
            ["bash", "-c", script + command],
            env={"KEY": self.key, "PATH": "/usr/bin:/bin"},
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

        def as_said(answer: tuple[int, Any]) -> bool:
            status, body = answer
            if status != wanted if wanted is not None else status >= 300:
                return False
            return all(found_in(body, key, value) for key, value in step.sketch())

        if "-X POST" in command:
            answer = await self.curl(command)
        else:
            # A read may show where things are going: as a reader would, ask again a moment
            # later (a delivery on its way to `succeeded`, a job still running).
            answer = await eventually(lambda: self.curl(command), as_said, timeout=60, every=0.2)
        assert as_said(answer), (step.command, step.expected, answer)
        status, body = answer
        if status in (201, 202) and isinstance(body, dict) and isinstance(body.get("id"), str):
            self.ids[body["id"].split("_", 1)[0]] = body["id"]
        return body

    async def python_client(self, receiver: Receiver) -> None:
        """The client example, its endpoint at a receiver that records what it gets: its last
        lines verify a request as received."""
        [block] = fenced("python", "from herald_client import")
        split = block.index("# In a receiver:")
        producer, in_a_receiver = block[:split], block[split:]
        producer = producer.replace("http://127.0.0.1:8000", self.api_url)
        producer = producer.replace("http://127.0.0.1:9000", receiver.url(""))
        example: dict[str, Any] = {"KEY": self.key}
        # The README's code as written (its URLs pointed here): a reader pastes it and runs it.
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
async def readme_receiver() -> AsyncIterator[str]:
    """The README's own receiver (its command line as it stands, on a port of this test's),
    answering; its URL."""
    [command] = fenced("sh", "http.server as h")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = await asyncio.create_subprocess_exec("bash", "-c", command.replace("9000", str(port)))

    async def post() -> int | None:
        try:
            async with httpx.AsyncClient() as http:
                return (await http.post(f"{url}/hook", json={"order": 42})).status_code
        except httpx.ConnectError:
            return None

    try:
        assert await eventually(post, lambda status: status is not None, timeout=30) == 204
        yield url
    finally:
        server.terminate()
        await server.wait()


async def test_the_readmes_examples_run_top_to_bottom_as_written(
    stack: Stack, tmp_path: Path
) -> None:
    [quick_start] = fenced("sh", "Idempotency-Key: order-42")
    [features] = fenced("sh", "/v1/event-types")
    [portal] = fenced("sh", "/v1/portal-sessions")
    api = start_api(stack, tmp_path, **SLOW_RETRIES)
    try:
        await wait_healthy(api)
        async with (
            readme_receiver() as receiver_url,
            running_receiver() as recording,
            httpx.AsyncClient(base_url=api.base_url) as http,
        ):
            made = await http.post("/v1/tenants", json={"name": "readme"}, headers=ADMIN)
            reader = Reader(api.base_url, receiver_url, free_port(), made.json()["api_key"])
            with running_worker(stack, tmp_path / "worker.log", **SLOW_RETRIES):
                for step in steps(quick_start):
                    await reader.run(step)
                await reader.python_client(recording)
                for step in steps(features):
                    await reader.run(step)
                # And once more after the features section: its order.paid schema is in
                # force now, and the client example's order must still be accepted.
                await reader.python_client(recording)
                for step in steps(portal):
                    await reader.run(step)
    finally:
        api.stop()


async def test_the_readmes_receiver_answers_a_post_with_204() -> None:
    async with readme_receiver():
        pass  # it answered 204 before it was handed over
