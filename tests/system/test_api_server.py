"""`herald api`'s own HTTP server against clients that hold on: connections that send nothing,
headers sent a byte at a time, header blocks too big or too many, more connections than it
takes. A real `herald api` process on short clocks, spoken to over raw sockets (the bytes are
the point: tests/fixtures/raw_http.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager

import httpx
import pytest

from tests.fixtures.processes import ApiProcess, start_api, wait_healthy
from tests.fixtures.raw_http import GET, SAFETY_NET, Connection, problem, status_of
from tests.fixtures.raw_http import connection as raw_connection
from tests.fixtures.stack import Stack
from tests.fixtures.waiting import eventually

SHORT_CLOCKS = {
    "HERALD_API_KEEP_ALIVE_SECONDS": "1",
    "HERALD_API_HEADER_TIMEOUT_SECONDS": "1",
}


@pytest.fixture(scope="module")
async def api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ApiProcess]:
    started = start_api(stack, tmp_path_factory.mktemp("api"), **SHORT_CLOCKS)
    try:
        await wait_healthy(started)
        yield started
    finally:
        started.stop()


def connection(api: ApiProcess) -> AbstractAsyncContextManager[Connection]:
    return raw_connection(int(api.base_url.rsplit(":", 1)[1]))


async def test_a_connection_that_never_sends_a_request_is_closed(api: ApiProcess) -> None:
    async with connection(api) as idle:
        assert await idle.until_closed() == b""  # closed without a word, as uvicorn's keep-alive


async def test_an_idle_keep_alive_connection_is_closed_stray_line_ends_or_not(
    api: ApiProcess,
) -> None:
    async with connection(api) as kept:
        kept.writer.write(GET + b"\r\n")
        assert (await kept.answer()).startswith(b"HTTP/1.1 200")
        assert await kept.until_closed() == b""
    # Line ends between requests begin no request: they do not keep a connection either.
    async with connection(api) as kept:
        kept.writer.write(GET + b"\r\n")
        assert (await kept.answer()).startswith(b"HTTP/1.1 200")
        sending = asyncio.create_task(kept.trickle(b"\r\n"))
        assert await kept.until_closed() == b""
        await sending


async def test_headers_sent_a_byte_at_a_time_are_cut_off_with_408(api: ApiProcess) -> None:
    async with connection(api) as slow:
        slow.writer.write(GET + b"X-Slow: ")
        sending = asyncio.create_task(slow.trickle(b"a"))  # a header value that never ends
        status, body = problem(await slow.until_closed())
        await sending
    assert status == 408
    assert "HERALD_API_HEADER_TIMEOUT_SECONDS" in body["detail"]


async def test_an_oversized_header_block_is_refused_with_431(api: ApiProcess) -> None:
    for oversized, setting in (
        (b"X-Big: " + b"a" * (2 * 1024 * 1024) + b"\r\n", "HERALD_API_MAX_HEADER_BYTES"),
        (b"".join(b"X-N%d: 1\r\n" % n for n in range(20_000)), "HERALD_API_MAX_HEADERS"),
        (b"X-Long: " + b"b" * 70_000 + b"\r\n", "HERALD_API_MAX_HEADER_BYTES"),
    ):
        async with connection(api) as greedy:
            greedy.writer.write(GET + oversized + b"\r\n")
            sent = asyncio.create_task(greedy.writer.drain())
            status, body = problem(await greedy.until_closed())
            await sent  # the server read it all, dropping it, so the answer was not lost
        assert status == 431, setting
        assert setting in body["detail"]
        assert "aaaa" not in body["detail"]  # what was sent is not repeated back


async def test_a_header_block_within_the_limits_is_served_however_it_arrives(
    api: ApiProcess,
) -> None:
    # 99 fields and nearly 60 KiB in all, written in small pieces that end mid-field.
    fields = b"".join(b"X-F%02d: %s\r\n" % (n, b"v" * 590) for n in range(98))
    request = GET + fields + b"\r\n"
    assert len(request) < 65_536
    async with connection(api) as patient:
        for start in range(0, len(request), 1000):
            patient.writer.write(request[start : start + 1000])
            await patient.writer.drain()
        assert (await patient.answer()).startswith(b"HTTP/1.1 200")


async def test_past_its_connection_limit_a_request_is_answered_503(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    api = start_api(
        stack,
        tmp_path_factory.mktemp("limited"),
        HERALD_API_MAX_CONNECTIONS="3",
        HERALD_API_KEEP_ALIVE_SECONDS="300",
    )
    try:
        await wait_healthy(api)
        async with (
            httpx.AsyncClient(base_url=api.base_url) as first,
            httpx.AsyncClient(base_url=api.base_url) as second,
        ):
            # Two connections held open (kept alive after their answers): with the next
            # one, three are open.
            assert (await first.get("/healthz")).status_code == 200
            assert (await second.get("/healthz")).status_code == 200
            async with httpx.AsyncClient(base_url=api.base_url) as third:
                refused = await third.get("/healthz")
            assert refused.status_code == 503
        # The held connections closed: a new one is served again.

        async def fresh_status() -> int:
            async with httpx.AsyncClient(base_url=api.base_url) as fresh:
                return (await fresh.get("/healthz")).status_code

        await eventually(fresh_status, lambda status: status == 200, timeout=SAFETY_NET)
    finally:
        api.stop()


async def test_a_websocket_upgrade_is_answered_as_plain_http(api: ApiProcess) -> None:
    # Herald serves no WebSocket (uvicorn runs with ws="none"): no protocol switch happens.
    async with connection(api) as upgrading:
        upgrading.writer.write(
            GET + b"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        )
        assert (await upgrading.answer()).startswith(b"HTTP/1.1 200")


@contextlib.asynccontextmanager
async def from_address(api: ApiProcess, address: str) -> AsyncIterator[Connection]:
    """A raw connection from a loopback address: from one other than 127.0.0.1 or ::1, a
    client uvicorn does not trust as a proxy (FORWARDED_ALLOW_IPS is 127.0.0.1 and ::1)."""
    port = int(api.base_url.rsplit(":", 1)[1])
    to = "::1" if ":" in address else "127.0.0.1"
    reader, writer = await asyncio.open_connection(to, port, local_addr=(address, 0))
    try:
        yield Connection(reader, writer)
    finally:
        writer.close()


async def test_one_client_cannot_hold_the_connections_every_client_needs(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # A flood, in small: half-sent request lines from one address, and the
    # configured header time long, so that only the per-client share can be what stops it.
    api = start_api(
        stack,
        tmp_path_factory.mktemp("shared"),
        HERALD_API_MAX_CONNECTIONS="20",
        HERALD_API_MAX_CONNECTIONS_PER_CLIENT="4",
        HERALD_API_HEADER_TIMEOUT_SECONDS="600",
        HERALD_API_KEEP_ALIVE_SECONDS="600",
    )
    try:
        await wait_healthy(api)
        async with contextlib.AsyncExitStack() as held:
            flood = [
                await held.enter_async_context(from_address(api, "127.0.0.2")) for _ in range(12)
            ]
            for socket in flood:
                socket.writer.write(b"GET /v1/deliver")  # a request line that never ends
            refused = []
            for socket in flood[4:]:
                status, body = problem(await socket.until_closed())
                refused.append((status, body["detail"]))
            assert refused == [(503, refused[0][1])] * 8
            assert "HERALD_API_MAX_CONNECTIONS_PER_CLIENT" in refused[0][1]
            # Another client is served the whole time, however many times it asks.
            async with httpx.AsyncClient(base_url=api.base_url) as victim:
                for _ in range(30):
                    assert (await victim.get("/healthz")).status_code == 200
            # Its share given back when it closes: the flooding client is served again.
            for socket in flood[:4]:
                socket.writer.close()

            async def served() -> bytes:
                async with from_address(api, "127.0.0.2") as again:
                    again.writer.write(GET + b"\r\n")
                    return await again.answer()

            await eventually(
                served, lambda answer: answer.startswith(b"HTTP/1.1 200"), timeout=SAFETY_NET
            )
    finally:
        api.stop()


async def answered(socket: Connection) -> int:
    """The status a GET on ``socket`` is answered with: 200, the connection kept, or the
    share's 503, the connection closed. The status line alone is read: a refused connection
    is reset when the GET reaches it, and what the reset finds unread may be lost."""
    socket.writer.write(GET + b"\r\n")
    return status_of(await asyncio.wait_for(socket.reader.readuntil(b"\r\n"), SAFETY_NET))


async def test_an_ipv6_client_is_held_to_its_share_and_an_ipv6_proxy_is_not(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Loopback has one IPv6 address, so one /64 with one address in it: that the share is the
    # /64's, not the address's, is shown in tests/unit/test_client_shares.py.
    share = {"HERALD_API_MAX_CONNECTIONS_PER_CLIENT": "2", "HERALD_API_KEEP_ALIVE_SECONDS": "600"}
    for allowed, held_to_share in (("127.0.0.1", True), ("127.0.0.1,::1", False)):
        api = start_api(
            stack,
            tmp_path_factory.mktemp("ipv6"),
            HERALD_HOST="::1",
            FORWARDED_ALLOW_IPS=allowed,
            **share,
        )
        try:
            await wait_healthy(api)
            async with contextlib.AsyncExitStack() as held:
                sockets = [
                    await held.enter_async_context(from_address(api, "::1")) for _ in range(5)
                ]
                statuses = [await answered(socket) for socket in sockets]
            assert statuses == ([200] * 2 + [503] * 3 if held_to_share else [200] * 5), allowed
        finally:
            api.stop()


async def test_ipv4_clients_on_a_dual_stack_socket_each_have_their_own_share(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # `--workers 2` on "::": one socket for both protocols, every IPv4 peer seen as
    # ::ffff:a.b.c.d -- all in one /64, and so one client, were they keyed as IPv6.
    api = start_api(
        stack,
        tmp_path_factory.mktemp("dual"),
        "--workers",
        "2",
        HERALD_HOST="::",
        HERALD_API_MAX_CONNECTIONS_PER_CLIENT="2",
        HERALD_API_KEEP_ALIVE_SECONDS="600",
    )
    try:
        await wait_healthy(api)
        async with contextlib.AsyncExitStack() as held:
            # 127.0.0.2 takes its share in both processes: two each, wherever the kernel
            # hands its connections (a refused one is closed, and another tried -- a moment
            # later: on a busy machine the second process may still be starting, and until
            # it listens the kernel hands every connection to the first).
            flooding = 0
            for _ in range(600):
                socket = await held.enter_async_context(from_address(api, "127.0.0.2"))
                if await answered(socket) == 200:
                    flooding += 1
                else:
                    await asyncio.sleep(0.05)
                if flooding == 4:
                    break
            assert flooding == 4
            async with from_address(api, "127.0.0.2") as beyond:
                assert await answered(beyond) == 503
            # Another IPv4 client is served, whichever process takes it.
            others = [
                await held.enter_async_context(from_address(api, "127.0.0.3")) for _ in range(2)
            ]
            assert [await answered(socket) for socket in others] == [200, 200]
            # And 127.0.0.1, a proxy uvicorn trusts, is held to no share though it is mapped.
            proxied = [
                await held.enter_async_context(from_address(api, "127.0.0.1")) for _ in range(5)
            ]
            assert [await answered(socket) for socket in proxied] == [200] * 5
    finally:
        api.stop()


async def test_while_the_server_is_pressed_a_half_sent_request_is_cut_off_soon(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Ten minutes configured; half the connections in use, so the pressed time applies: the
    # half-sent request is answered 408 long before its configured time could pass.
    api = start_api(
        stack,
        tmp_path_factory.mktemp("pressed"),
        HERALD_API_MAX_CONNECTIONS="8",
        HERALD_API_HEADER_TIMEOUT_SECONDS="600",
        HERALD_API_KEEP_ALIVE_SECONDS="600",
    )
    try:
        await wait_healthy(api)
        async with contextlib.AsyncExitStack() as held:
            others = [await held.enter_async_context(connection(api)) for _ in range(3)]
            async with connection(api) as half_sent:
                half_sent.writer.write(b"GET /healthz HTTP/1.1\r\nHost: her")
                status, body = problem(await half_sent.until_closed())
            assert status == 408, body
            assert "while the server is busy" in body["detail"]
            assert len(others) == 3
    finally:
        api.stop()
