"""The attempts' HTTP client (app/engine/service/http_client.py) against receivers on
127.0.0.1 that misbehave byte by byte -- silent, trickling, oversized, closing -- each ending
recorded with its outcome class, and the guards it keeps shown holding, then shown to be what
held (lifted, the same request goes through)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from app.core.proxies import EgressProxy
from app.core.states import Outcome
from app.endpoints.service.destinations import IPNetwork, resolve
from app.engine.service import sender
from app.engine.service.connections import HEAD_BYTES, HEADER_BYTES
from app.engine.service.http_client import HttpClient

LOOPBACK: tuple[IPNetwork, ...] = (ipaddress.ip_network("127.0.0.0/8"),)
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
# A bound on waiting for the server: never reached by a passing test.
SAFETY_NET = 30.0

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class Server:
    port: int
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    open_now: int = 0
    most_open: int = 0
    # Set whenever no connection is open (after at least one was).
    all_closed: asyncio.Event = field(default_factory=asyncio.Event)

    def url(self, host: str = "127.0.0.1", path: str = "/hook") -> str:
        return f"http://{host}:{self.port}{path}"


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return head + await reader.readexactly(length)


@contextlib.asynccontextmanager
async def serving(
    answer: Callable[[Server, asyncio.StreamWriter], Awaitable[bool]],
) -> AsyncIterator[Server]:
    """A raw HTTP/1.1 server: reads each request whole, then ``answer`` writes what it will
    and says whether to read another request on the same connection."""
    server = Server(0)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        server.connections += 1
        server.open_now += 1
        server.all_closed.clear()
        server.most_open = max(server.most_open, server.open_now)
        try:
            while True:
                try:
                    request = await read_request(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                server.requests.append(request)
                if not await answer(server, writer):
                    return
        finally:
            server.open_now -= 1
            if not server.open_now:
                server.all_closed.set()
            writer.close()

    listening = await asyncio.start_server(handle, "127.0.0.1", 0)
    server.port = listening.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        listening.close()


HEADERS = {"Content-Type": "application/json", "Idempotency-Key": "dlv_1"}


async def attempt(
    http: HttpClient,
    url: str,
    *,
    timeout: float = 5.0,
    headers: dict[str, str] = HEADERS,
    proxy: EgressProxy | None = None,
    progress: sender.SendProgress | None = None,
) -> sender.AttemptResult:
    """One attempt as a worker sends it (sender.send), its progress tracked in ``progress``."""

    async def heard(progress: sender.SendProgress) -> None:
        return None

    return await sender.send(
        http,
        url=url,
        body=b'{"n":1}',
        headers=headers,
        timeout=timeout,
        progress=progress or sender.SendProgress(),
        retry_after_max=60,
        on_answer=heard,
        proxy=proxy,
    )


async def ok(server: Server, writer: asyncio.StreamWriter) -> bool:
    writer.write(OK)
    await writer.drain()
    return True


async def test_connections_are_reused_and_the_request_is_what_was_asked() -> None:
    http = HttpClient(LOOPBACK, 10)
    async with serving(ok) as server:
        results = [await attempt(http, server.url()) for _ in range(3)]
    http.close()
    assert [r.outcome for r in results] == [Outcome.SUCCESS] * 3
    assert server.connections == 1 and len(server.requests) == 3
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /hook HTTP/1.1"
    assert f"Host: 127.0.0.1:{server.port}".encode() in lines
    assert b"Idempotency-Key: dlv_1" in lines and body == b'{"n":1}'


async def test_an_answer_longer_than_the_cap_is_cut_and_its_connection_never_reused() -> None:
    size = 4 * sender.MAX_RESPONSE_BYTES

    async def chatty(server: Server, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 500 Oops\r\nContent-Length: %d\r\n\r\n" % size)
        with contextlib.suppress(ConnectionError):
            for _ in range(size // 1024):
                writer.write(b"\x00ab" * 341 + b"a")
                await writer.drain()
        return True

    http = HttpClient(LOOPBACK, 10)
    async with serving(chatty) as server:
        first = await attempt(http, server.url())
        second = await attempt(http, server.url())
    http.close()
    assert first.outcome is Outcome.RETRYABLE and first.status_code == 500
    assert first.response_body is not None and first.response_body.startswith("abab")
    assert len(first.response_body.encode()) <= sender.STORED_RESPONSE_BYTES
    # The rest was never read: the connection was closed, and the next request made another.
    assert second.status_code == 500 and server.connections == 2


async def test_headers_that_trickle_are_cut_at_the_deadline_and_the_outcome_is_unknown() -> None:
    async def trickle(server: Server, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\n")
        with contextlib.suppress(ConnectionError):
            for _ in range(int(SAFETY_NET / 0.05)):
                writer.write(b"X")
                await writer.drain()
                await asyncio.sleep(0.05)
        return False

    http = HttpClient(LOOPBACK, 10)
    async with serving(trickle) as server:
        result = await attempt(http, server.url(), timeout=0.5)
        await asyncio.wait_for(server.all_closed.wait(), SAFETY_NET)  # Herald hung up
    http.close()
    assert result.outcome is Outcome.UNKNOWN and result.status_code is None
    assert result.error == "after sending: timed out after 0.5 s"


async def test_a_receiver_that_never_answers_is_unknown() -> None:
    async def silent(server: Server, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(SAFETY_NET)
        return False

    http = HttpClient(LOOPBACK, 10)
    async with serving(silent) as server:
        result = await attempt(http, server.url(), timeout=0.3)
    http.close()
    assert len(server.requests) == 1  # it was written whole
    assert (
        result.outcome is Outcome.UNKNOWN and result.error == "after sending: timed out after 0.3 s"
    )


async def test_a_receiver_that_closes_after_reading_the_request_is_unknown() -> None:
    async def hang_up(server: Server, writer: asyncio.StreamWriter) -> bool:
        return False

    http = HttpClient(LOOPBACK, 10)
    async with serving(hang_up) as server:
        result = await attempt(http, server.url())
    http.close()
    assert len(server.requests) == 1
    assert result.outcome is Outcome.UNKNOWN
    assert result.error == (
        "after sending: Disconnected: the connection closed before the answer was complete"
    )
    assert result.refused_by_peer  # as a receiver refusing a client certificate ends it


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        (
            b"X-Big: " + b"x" * (HEADER_BYTES + 1) + b"\r\n",
            f"a header is longer than {HEADER_BYTES}",
        ),
        (b"X-Many: x\r\n" * (HEAD_BYTES // 10), f"its headers are longer than {HEAD_BYTES}"),
    ],
)
async def test_headers_past_their_bounds_are_an_answer_herald_cannot_read(
    headers: bytes, why: str
) -> None:
    async def oversized(server: Server, writer: asyncio.StreamWriter) -> bool:
        with contextlib.suppress(ConnectionError):
            writer.write(b"HTTP/1.1 200 OK\r\n" + headers + b"Content-Length: 0\r\n\r\n")
            await writer.drain()
        return False

    http = HttpClient(LOOPBACK, 10)
    async with serving(oversized) as server:
        result = await attempt(http, server.url())
    http.close()
    assert result.outcome is Outcome.UNKNOWN and result.status_code is None
    assert result.error is not None and why in result.error, result.error


async def test_a_connection_the_receiver_closed_while_idle_is_not_used_again() -> None:
    async def once(server: Server, writer: asyncio.StreamWriter) -> bool:
        writer.write(OK)  # keep-alive by HTTP/1.1's default, then closed all the same
        await writer.drain()
        return False

    http = HttpClient(LOOPBACK, 10)
    async with serving(once) as server:
        first = await attempt(http, server.url())
        await asyncio.wait_for(server.all_closed.wait(), SAFETY_NET)
        second = await attempt(http, server.url())
    http.close()
    assert first.outcome is second.outcome is Outcome.SUCCESS
    assert server.connections == 2


async def test_no_more_connections_open_than_the_limit() -> None:
    gate = asyncio.Event()

    async def held(server: Server, writer: asyncio.StreamWriter) -> bool:
        if len(server.requests) >= 2:
            gate.set()
        await gate.wait()
        return await ok(server, writer)

    http = HttpClient(LOOPBACK, 2)
    async with serving(held) as server:
        urls = [server.url(path=f"/{n}") for n in range(6)]
        results = await asyncio.gather(*(attempt(http, url) for url in urls))
    http.close()
    assert [r.outcome for r in results] == [Outcome.SUCCESS] * 6
    assert server.most_open == 2 and server.connections == 2


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_the_guard_refuses_without_connecting_and_is_what_refused(host: str) -> None:
    guarded, lifted = HttpClient((), 10), HttpClient(LOOPBACK, 10)
    async with serving(ok) as server:
        refused = await attempt(guarded, server.url(host))
        assert server.connections == 0
        allowed = await attempt(lifted, server.url(host))
    guarded.close()
    lifted.close()
    assert refused.outcome is Outcome.BLOCKED
    expected = (
        "127.0.0.1 is a loopback address"
        if host == "127.0.0.1"
        else "'localhost' resolves to a non-public address"
    )
    assert refused.error is not None and refused.error.startswith(expected), refused.error
    assert allowed.outcome is Outcome.SUCCESS and server.connections == 1


@pytest.mark.parametrize(
    "host", ["[::1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[64:ff9b::7f00:1]", "[::]"]
)
async def test_ipv6_forms_of_internal_addresses_are_refused(host: str) -> None:
    http = HttpClient((), 10)
    result = await attempt(http, f"http://{host}:9/hook")
    http.close()
    assert result.outcome is Outcome.BLOCKED, result.error


async def test_a_request_the_lease_no_longer_covers_is_not_written() -> None:
    http = HttpClient(LOOPBACK, 10)
    async with serving(ok) as server:
        late = asyncio.get_running_loop().time() - 1
        result = await attempt(http, server.url(), progress=sender.SendProgress(write_by=late))
        await asyncio.sleep(0)  # let the server see whatever was written
    http.close()
    assert server.requests == []
    assert result.outcome is Outcome.RETRYABLE and result.failed_inside_herald
    assert result.error == "before sending: the lease ended before the request was written"


async def test_a_header_with_a_line_break_is_never_written() -> None:
    http = HttpClient(LOOPBACK, 10)
    async with serving(ok) as server:
        progress = sender.SendProgress()
        smuggling = {"Authorization": "Bearer x\r\nX-Smuggled: 1"}
        result = await attempt(http, server.url(), headers=smuggling, progress=progress)
    http.close()
    assert server.connections <= 1 and server.requests == []
    assert result.outcome is Outcome.PERMANENT and not progress.sent


async def test_a_second_answer_to_one_request_ends_the_connection() -> None:
    """Bytes past the one answer a request gets could be read as the next request's answer:
    the connection is closed instead, and each request gets its own answer."""

    async def twice(server: Server, writer: asyncio.StreamWriter) -> bool:
        if len(server.requests) == 1:
            writer.write(OK + b"HTTP/1.1 500 Forged\r\nContent-Length: 6\r\n\r\nforged")
        else:
            writer.write(b"HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy")
        await writer.drain()
        return True

    http = HttpClient(LOOPBACK, 10)
    async with serving(twice) as server:
        first = await attempt(http, server.url())
        second = await attempt(http, server.url())
    http.close()
    assert (first.status_code, first.response_body) == (200, "ok")
    assert (second.status_code, second.response_body) == (503, "busy")
    assert server.connections == 2


async def test_a_connection_is_never_shared_between_names_of_one_address() -> None:
    """Plain http to one address under two names: a connection made for one name is never
    another's (a tenant's receiver cannot answer for another tenant's name)."""
    assert {a.compressed for a in await resolve("localhost", 80)} == {"127.0.0.1"}
    http = HttpClient(LOOPBACK, 10)
    async with serving(ok) as server:
        by_name = await attempt(http, server.url("localhost"))
        by_address = await attempt(http, server.url("127.0.0.1"))
        again = await attempt(http, server.url("localhost"))
    http.close()
    assert by_name.outcome is by_address.outcome is again.outcome is Outcome.SUCCESS
    assert server.connections == 2 and len(server.requests) == 3


async def test_retry_after_is_heard_on_a_status_line_without_a_reason() -> None:
    async def busy(server: Server, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 429\r\nRetry-After: 7\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        return True

    http = HttpClient(LOOPBACK, 10)
    async with serving(busy) as server:
        result = await attempt(http, server.url())
    http.close()
    assert result.status_code == 429 and result.retry_after_until is not None


async def test_a_switch_of_protocols_is_an_answer_and_ends_the_connection() -> None:
    async def upgrade(server: Server, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\nbinary")
        await writer.drain()
        return True

    http = HttpClient(LOOPBACK, 10)
    async with serving(upgrade) as server:
        first = await attempt(http, server.url())
        second = await attempt(http, server.url())
    http.close()
    assert first.status_code == second.status_code == 101
    assert server.connections == 2


async def test_a_body_cut_short_of_its_length_is_not_read_as_whole() -> None:
    async def cut(server: Server, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 10\r\n\r\nhalf")
        await writer.drain()
        return False

    http = HttpClient(LOOPBACK, 10)
    async with serving(cut) as server:
        result = await attempt(http, server.url())
    http.close()
    assert result.status_code == 200 and result.error is not None
    assert result.error.startswith("reading the response"), result.error


async def test_a_connection_the_receiver_spoke_on_unasked_is_not_used_again() -> None:
    """Bytes after an answer -- in its read or while the connection is idle -- could be taken
    for the next request's answer: the connection is closed, and the next request gets a new
    one and its own answer."""

    async def chatty(server: Server, writer: asyncio.StreamWriter) -> bool:
        writer.write(OK)
        await writer.drain()
        if len(server.requests) == 1:
            writer.write(b"HTTP/1.1 500 Unasked\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
        return True

    http = HttpClient(LOOPBACK, 10)
    async with serving(chatty) as server:
        first = await attempt(http, server.url())
        second = await attempt(http, server.url())
    http.close()
    assert first.status_code == second.status_code == 200
    assert server.connections == 2


async def test_a_framing_header_is_never_sent() -> None:
    http = HttpClient(LOOPBACK, 10)
    async with serving(ok) as server:
        result = await attempt(http, server.url(), headers={"Transfer-Encoding": "chunked"})
    http.close()
    assert server.connections == 0
    assert result.outcome is Outcome.PERMANENT
    assert result.error == "request not built: the header Transfer-Encoding is Herald's to set"


async def test_the_operators_proxy_failing_is_herald_s_and_never_named() -> None:
    """HERALD_EGRESS_PROXY that does not resolve, or hangs up on the CONNECT: Herald's own
    failure, not the receiver's (the breaker does not count it), and the tenant never reads
    where the operator's proxy is."""

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.close()

    listening = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    http = HttpClient(LOOPBACK, 10)
    results = []
    for proxy_url in ("http://squid.no-such-host.invalid:3128", f"http://127.0.0.1:{port}"):
        proxy = EgressProxy.parse(proxy_url, trusted=True)
        results.append(await attempt(http, "https://127.0.0.1:9/hook", proxy=proxy))
    http.close()
    listening.close()
    for result in results:
        assert result.outcome is Outcome.RETRYABLE and result.failed_inside_herald
        assert result.error == "before sending: egress proxy: unreachable"
        assert not result.refused_by_peer
