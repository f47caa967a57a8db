"""HTTP/1.1 connections for attempts, on asyncio's protocols with llhttp (httptools) parsing
the answers (pooled by pool.py).

A connection is made to an address Herald has already vetted (http_client.py): nothing here
resolves a name. A pooled connection is keyed by everything that made it -- the address, the
TLS context and server name, the proxy and its tunnel -- so a request only ever reuses a
connection made for exactly its route.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import cast

import httptools

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

    status: int = 0
    retry_after: str | None = None
    keep_alive: bool = True
    body: list[bytes] = field(default_factory=list)
    size: int = 0  # of the body kept
    received: int = 0  # of the body read
    length: int | None = None  # Content-Length, when it said one
    chunked: bool = False
    capped: bool = False  # longer than the cap: the rest was never read


class Connection(asyncio.Protocol):
    """One connection, carrying one request at a time. ``answer()`` waits for the status line
    and headers, ``body()`` for the rest, keeping at most the cap given to ``send``: a longer
    answer ends the connection rather than being read to its end. Whatever a receiver sends
    beyond its one answer ends the connection too: a pooled connection is only ever reused in
    the state a fresh one is in."""

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._answer: Answer | None = None  # the response being parsed
        self._heard: asyncio.Future[Answer] | None = None
        self._done: asyncio.Future[None] | None = None
        self._interim = False
        self._answered = False  # the final answer is complete: nothing more may come
        self._extra = False  # and something more came
        self._head_bytes = 0  # read while the headers were incomplete
        self._header_bytes = 0  # of the headers parsed
        self._fault = ""
        self._cap = 0

    # -- asyncio's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's are not asyncio.Transport subclasses).
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._heard is None or self._answered:
            # Idle, or past its one answer: a receiver does not speak unasked.
            self._extra = True
            self.close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # A 101: the connection is no longer HTTP. Its answer is in; nothing else is read.
            self._extra = True
            self._finish()
            self.close()
            return
        except httptools.HttpParserError as exc:
            self._refuse(self._fault or f"it is not HTTP/1.1 ({exc})")
            return
        if self._extra:
            self.close()
            return
        if not self._heard.done():
            # Still in the headers (llhttp holds a header until it ends): bounded in all.
            self._head_bytes += len(data)
            if self._head_bytes > HEAD_BYTES:
                self._refuse(f"its headers are longer than {HEAD_BYTES} bytes")

    def eof_received(self) -> bool | None:
        return None  # close the transport: HTTP/1.1 has no half-closed use here

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        answer, heard, done = self._answer, self._heard, self._done
        if (
            exc is None
            and answer is not None
            and heard is not None
            and heard.done()
            and done is not None
            and not done.done()
            and answer.length is None
            and not answer.chunked
        ):
            # A body with neither a length nor chunks is read to the close: complete. One
            # cut short of its length or its last chunk is not.
            answer.keep_alive = False
            done.set_result(None)
            return
        self._fail(exc or Disconnected("the connection closed before the answer was complete"))

    # -- llhttp's callbacks

    def on_message_begin(self) -> None:
        if self._answered:
            self._extra = True
            raise MalformedAnswer("more than one answer")  # llhttp stops parsing
        self._answer = Answer()

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) + len(value) > HEADER_BYTES:
            self._fault = f"a header is longer than {HEADER_BYTES} bytes"
            raise MalformedAnswer(self._fault)  # llhttp stops parsing
        self._header_bytes += len(name) + len(value) + 4
        if self._header_bytes > HEAD_BYTES:
            self._fault = f"its headers are longer than {HEAD_BYTES} bytes"
            raise MalformedAnswer(self._fault)
        answer, name = self._answer, name.lower()
        if answer is None:
            return
        if name == b"retry-after":
            answer.retry_after = value.decode("latin-1")
        elif name == b"content-length" and value.strip().isdigit():
            answer.length = int(value)
        elif name == b"transfer-encoding":
            answer.chunked = True

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self._interim = True  # 100 Continue, 103 Early Hints: the answer is still to come
            return
        answer = self._answer or Answer()
        answer.status = status
        answer.keep_alive = self._parser.should_keep_alive() and status != 101
        self._answer = answer
        if self._heard is not None and not self._heard.done():
            self._heard.set_result(answer)

    def on_body(self, chunk: bytes) -> None:
        answer = self._answer
        if answer is None:
            return
        answer.received += len(chunk)
        if answer.capped:
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
        self._answered = True
        self._finish()

    # -- Herald's side

    def send(self, request: bytes, cap: int) -> None:
        """Write ``request`` whole; the answer is then awaited with ``answer()``. Raises
        Disconnected, writing nothing, when the connection is already closing."""
        if self.closed or self.transport is None or self.transport.is_closing():
            raise Disconnected("the connection closed before the request was written")
        loop = asyncio.get_running_loop()
        self._answer = None
        self._answered = self._interim = False
        self._head_bytes = self._header_bytes = 0
        self._cap = cap
        self._heard = loop.create_future()
        self._done = loop.create_future()
        self.transport.write(request)

    async def answer(self) -> Answer:
        assert self._heard is not None
        return await self._heard

    async def body(self) -> bytes:
        """The body of the answer ``answer()`` returned, at most the cap given to ``send``."""
        assert self._heard is not None and self._done is not None
        answer = self._heard.result()  # not a later response's: nothing may follow it
        await self._done
        return b"".join(answer.body)

    @property
    def reusable(self) -> bool:
        heard, done = self._heard, self._done
        return (
            not self.closed
            and not self._extra
            and self.transport is not None
            and not self.transport.is_closing()
            # A receiver that answered before reading the whole request leaves it queued.
            and self.transport.get_write_buffer_size() == 0
            and heard is not None
            and heard.done()
            and not heard.cancelled()
            and heard.exception() is None
            and heard.result().keep_alive
            and done is not None
            and done.done()
            and not done.cancelled()  # its reader was cancelled (a deadline) mid-body
            and done.exception() is None
        )

    def tunnel(self) -> None:
        """The proxy said yes to a CONNECT: what follows is the receiver's, TLS first."""
        self._parser = httptools.HttpResponseParser(self)
        self._heard = self._done = None
        self._answer = None
        self._answered = False

    @property
    def reusable_idle(self) -> bool:
        """An idle connection the receiver has not closed, nor written to, meanwhile."""
        return (
            not self.closed
            and not self._extra
            and self.transport is not None
            and not self.transport.is_closing()
        )

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
