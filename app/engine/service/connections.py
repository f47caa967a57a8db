"""HTTP/1.1 connections for attempts, on asyncio's protocols with llhttp (httptools) parsing
the answers, and their pool.

A connection is made to an address Herald has already vetted (http_client.py): nothing here
resolves a name. A pooled connection is keyed by everything that made it -- the address, the
TLS context and server name, the proxy and its tunnel -- so a request only ever reuses a
connection made for exactly its route.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import cast

import httptools

# An idle connection kept longer than this is closed rather than reused: receivers close idle
# connections on their own clock (uvicorn after 5 s, nginx 75 s), and a request written on a
# connection the receiver is closing is one whose fate is unknown.
IDLE_SECONDS = 4.0
# What an answer's status line and headers may take, in all and one header: a receiver cannot
# make Herald hold more (the limits aiohttp and nginx hold a header to).
HEAD_BYTES = 64 * 1024
HEADER_BYTES = 8190


class Disconnected(ConnectionError):
    """The receiver (or the proxy) closed the connection before its answer was complete."""


class MalformedAnswer(Exception):
    """What came back is not HTTP/1.1."""


@dataclass
class Answer:
    """A response's status and the few headers an attempt acts on, then its body."""

    status: int
    retry_after: str | None = None
    keep_alive: bool = True
    body: list[bytes] = field(default_factory=list)
    size: int = 0
    capped: bool = False  # longer than the cap: the rest was never read


class Connection(asyncio.Protocol):
    """One connection, carrying one request at a time. ``answer()`` waits for the status line
    and headers, ``body(cap)`` for the rest, keeping at most ``cap`` bytes: a longer answer
    ends the connection rather than being read to its end."""

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._answer: Answer | None = None
        self._heard: asyncio.Future[Answer] | None = None
        self._done: asyncio.Future[None] | None = None
        self._interim = False
        self._head_bytes = 0  # read while the headers were incomplete
        self._header_bytes = 0  # of the headers parsed
        self._fault = ""
        self._cap = 0

    # -- asyncio's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's are not asyncio.Transport subclasses).
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._heard is None:  # idle: a receiver does not speak unasked; never reuse it
            self.close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._refuse(self._fault or f"it is not HTTP/1.1 ({exc})")
            return
        if self._heard is not None and not self._heard.done():
            # Still in the headers (llhttp holds a header until it ends): bounded in all.
            self._head_bytes += len(data)
            if self._head_bytes > HEAD_BYTES:
                self._refuse(f"its headers are longer than {HEAD_BYTES} bytes")

    def eof_received(self) -> bool | None:
        return None  # close the transport: HTTP/1.1 has no half-closed use here

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        heard, done = self._heard, self._done
        if (
            exc is None
            and self._answer is not None
            and heard is not None
            and heard.done()
            and done is not None
            and not done.done()
            and not self._parser.should_keep_alive()
        ):
            # llhttp reads a body with neither a length nor chunks to the close: complete.
            self._answer.keep_alive = False
            done.set_result(None)
            return
        self._fail(exc or Disconnected("the connection closed before the answer was complete"))

    # -- llhttp's callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) + len(value) > HEADER_BYTES:
            self._fault = f"a header is longer than {HEADER_BYTES} bytes"
            raise MalformedAnswer(self._fault)  # llhttp stops parsing
        self._header_bytes += len(name) + len(value) + 4
        if self._header_bytes > HEAD_BYTES:
            self._fault = f"its headers are longer than {HEAD_BYTES} bytes"
            raise MalformedAnswer(self._fault)
        if self._answer is not None and name.lower() == b"retry-after":
            self._answer.retry_after = value.decode("latin-1")

    def on_status(self, status: bytes) -> None:
        self._answer = Answer(status=0)

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self._interim = True  # 100 Continue, 103 Early Hints: the answer is still to come
            return
        answer = self._answer or Answer(status=status)
        answer.status = status
        answer.keep_alive = self._parser.should_keep_alive()
        self._answer = answer
        if self._heard is not None and not self._heard.done():
            self._heard.set_result(answer)

    def on_body(self, chunk: bytes) -> None:
        answer = self._answer
        if answer is None or answer.capped:
            return
        kept = chunk[: self._cap - answer.size]
        answer.body.append(kept)
        answer.size += len(kept)
        if answer.size >= self._cap and len(kept) < len(chunk):
            # Past the cap: the rest is never read, and the connection is not reused.
            answer.capped = True
            answer.keep_alive = False
            self._finish()

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            self._answer = None
            return
        self._finish()

    # -- Herald's side

    def send(self, request: bytes, cap: int) -> None:
        """Write ``request`` whole; the answer is then awaited with ``answer()``."""
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        self._answer = None
        self._head_bytes = self._header_bytes = 0
        self._cap = cap
        self._heard = loop.create_future()
        self._done = loop.create_future()
        self.transport.write(request)

    async def answer(self) -> Answer:
        assert self._heard is not None
        return await self._heard

    async def body(self) -> bytes:
        """The body, at most the cap given to ``send``."""
        assert self._done is not None and self._answer is not None
        await self._done
        return b"".join(self._answer.body)

    @property
    def reusable(self) -> bool:
        return (
            not self.closed
            and self._answer is not None
            and self._answer.keep_alive
            and self._done is not None
            and self._done.done()
            and not self._done.cancelled()  # its reader was cancelled (a deadline) mid-body
            and self._done.exception() is None
        )

    def tunnel(self) -> None:
        """The proxy said yes to a CONNECT: what follows is the receiver's, TLS first."""
        self._parser = httptools.HttpResponseParser(self)
        self._heard = self._done = None
        self._answer = None

    def idle(self, now: float) -> None:
        self._heard = self._done = None
        self._answer = None
        self.idle_since = now

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _refuse(self, why: str) -> None:
        self._fail(MalformedAnswer(f"an answer Herald cannot read: {why}"))
        self.close()

    def _finish(self) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        for waiter in (self._heard, self._done):
            if waiter is not None and not waiter.done():
                waiter.set_exception(exc)
                waiter.exception()  # retrieved: whoever awaits the other one reports it


Connect = Callable[[], Awaitable[Connection]]


class Pool:
    """Connections kept open between requests, by route. At most ``limit`` are open at once
    (0: no limit), idle ones counted: a request that finds none free closes the connection
    idle longest, or waits for one to end."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._open = 0
        self._idle: dict[Hashable, list[Connection]] = {}
        self._idle_order: OrderedDict[Connection, None] = OrderedDict()  # longest idle first
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self, key: Hashable, connect: Connect) -> Connection:
        """An idle connection of ``key``'s, the last one used (so few stay warm), or a new one
        from ``connect`` -- once there is room: a connection idle for another route is closed
        to make it, or else the request waits for one to be released."""
        self._close_stale(asyncio.get_running_loop().time())
        while True:
            idle = self._idle.get(key)
            while idle:
                connection = idle.pop()
                del self._idle_order[connection]
                if not connection.closed:
                    return connection
                self._forget(connection)
            if not self._limit or self._open < self._limit:
                break
            if self._idle_order:
                self._evict()
                continue
            await self._released()
        self._open += 1
        try:
            connection = await connect()
        except BaseException:
            self._open -= 1
            self._wake()
            raise
        return connection

    def release(self, connection: Connection) -> None:
        """Done with ``connection``: kept if its answer was read whole and the receiver keeps
        it open, closed otherwise (a request abandoned half-way is never reused)."""
        if not connection.reusable:
            connection.close()
            self._forget(connection)
            return
        connection.idle(asyncio.get_running_loop().time())
        self._idle.setdefault(connection.key, []).append(connection)
        self._idle_order[connection] = None
        self._wake()  # one waiting for room takes it, or closes it to make its own

    def close(self) -> None:
        while self._idle_order:
            self._evict()

    async def _released(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._wake()  # woken and cancelled at once: the turn passes on
            raise

    def _evict(self) -> None:
        connection, _ = self._idle_order.popitem(last=False)
        self._idle[connection.key].remove(connection)
        connection.close()
        self._forget(connection)

    def _close_stale(self, now: float) -> None:
        while self._idle_order:
            oldest = next(iter(self._idle_order))
            if now - oldest.idle_since < IDLE_SECONDS and not oldest.closed:
                return
            self._evict()

    def _forget(self, connection: Connection) -> None:
        if not self._idle.get(connection.key, True):
            del self._idle[connection.key]
        self._open -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
