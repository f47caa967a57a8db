"""`herald api`'s HTTP protocol: uvicorn's httptools protocol, with the limits it lacks.

Read in uvicorn's source (0.54): its keep-alive timer is armed only after a response and is
cancelled by any byte received, so a connection that never sends a request, or sends its
headers a byte at a time, stays open for ever; and llhttp, the httptools parser, takes a header
block of any size and any number of fields (``h11_max_incomplete_event_size`` bounds the h11
parser only, which costs every request its pure-Python parsing). So here, for each connection:

- no request begun ``HERALD_API_KEEP_ALIVE_SECONDS`` after it opened or after its last answer
  (stray bytes that begin no request do not count): closed, without an answer, as uvicorn
  closes an idle keep-alive connection;
- a request's line and headers not all in ``HERALD_API_HEADER_TIMEOUT_SECONDS`` after their
  first byte: 408;
- more than ``HERALD_API_MAX_HEADER_BYTES`` of them, or more than ``HERALD_API_MAX_HEADERS``
  fields: 431, as soon as the parser has seen that much (the memory a request holds before it
  is refused is that limit and one read);
- more than ``HERALD_API_MAX_CONNECTIONS_PER_CLIENT`` open from one client (an IPv4 address,
  an IPv6 /64): 503 and closed at once, so that no one client can fill
  ``HERALD_API_MAX_CONNECTIONS`` (and every other client with it) with connections it never
  finishes. Who the client is, and the proxies held to no share: app/api/client_shares.py;
- while half of ``HERALD_API_MAX_CONNECTIONS`` are open, a connection waiting for its request
  and a request's header block each get at most ``PRESSED_SECONDS``: under a flood of
  half-sent requests, the connections they hold are given back soonest.

A refusal is problem+json like every Herald error, says which setting refused, and is followed
by a lingering close: Herald stops sending, then reads and drops what the client still sends
until it closes or ``HERALD_API_KEEP_ALIVE_SECONDS`` pass, so the client reads the answer rather
than a reset. The body is the app's to bound (``BodyLimit``, app/api/middleware.py); how slowly
it may arrive is the reverse proxy's (docs/operations.md).
"""

from __future__ import annotations

import asyncio
import functools
import json
from dataclasses import dataclass
from typing import Any

import structlog
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from app.api.client_shares import ClientShares, client_of
from app.api.problems import PROBLEM_JSON
from app.core.config import load_settings
from app.core.errors import PROBLEM_BASE

log = structlog.get_logger("herald.api")

# What a half-sent request, or a connection with none, is given while the process is pressed.
PRESSED_SECONDS = 1.0
# Connections open in this process, by client (the per-client share's count).
_shares = ClientShares()


@dataclass(frozen=True)
class HeaderLimits:
    keep_alive_seconds: float
    header_timeout_seconds: float
    max_header_bytes: int
    max_headers: int
    max_connections: int
    max_connections_per_client: int


@functools.cache
def header_limits() -> HeaderLimits:
    """Read once per process from HERALD_*, as each uvicorn worker process builds its app."""
    settings = load_settings()
    return HeaderLimits(
        keep_alive_seconds=settings.api_keep_alive_seconds,
        header_timeout_seconds=settings.api_header_timeout_seconds,
        max_header_bytes=settings.api_max_header_bytes,
        max_headers=settings.api_max_headers,
        max_connections=settings.api_max_connections,
        max_connections_per_client=settings.api_max_connections_per_client,
    )


@dataclass(frozen=True)
class Refusal:
    status: int
    reason: str  # the status line's phrase, and the problem's title
    slug: str
    detail: str

    def response(self) -> bytes:
        body = json.dumps(
            {
                "type": PROBLEM_BASE + self.slug,
                "title": self.reason,
                "status": self.status,
                "detail": self.detail,
            }
        ).encode()
        head = (
            f"HTTP/1.1 {self.status} {self.reason}\r\n"
            f"content-type: {PROBLEM_JSON}\r\ncontent-length: {len(body)}\r\n"
            "connection: close\r\n\r\n"
        )
        return head.encode() + body


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """One connection, as uvicorn's httptools protocol serves it, held to HeaderLimits."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.limits = header_limits()
        self.in_header_block = False  # between a request's first byte and its headers' end
        self.header_bytes = 0  # the block's line and fields parsed so far
        self.read_inside_block = 0  # whole reads that fell inside it (see data_received)
        self.header_fields = 0
        # Closes the connection unless cancelled: armed while no request is under way, and
        # for the linger after a refusal.
        self.closer: asyncio.TimerHandle | None = None
        self.header_deadline: asyncio.TimerHandle | None = None
        self.refused = False
        self.counted_as: str | None = None  # its client, while counted in that client's share

    # The connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        client = client_of(transport.get_extra_info("peername"), self.config.forwarded_allow_ips)
        share = self.limits.max_connections_per_client
        if client is not None and not _shares.take(client, share):
            self._refuse(
                Refusal(
                    503,
                    "Service Unavailable",
                    "unavailable",
                    f"this client already has {share} connections open to this process "
                    "(HERALD_API_MAX_CONNECTIONS_PER_CLIENT): reuse one, or close one first",
                )
            )
            self.transport.close()  # no linger: it would hold a slot the share refused
            return
        self.counted_as = client
        self._close_in(self._held(self.limits.keep_alive_seconds))

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop(self.closer)
        self._stop(self.header_deadline)
        if self.counted_as is not None:
            _shares.give_back(self.counted_as)
            self.counted_as = None
        super().connection_lost(exc)

    def _held(self, seconds: float) -> float:
        """How long a connection may wait, made short while half the process's are in use."""
        if len(self.connections) * 2 >= self.limits.max_connections:
            return min(seconds, PRESSED_SECONDS)
        return seconds

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return  # answered: what still arrives is dropped until the client closes
        continuing = self.in_header_block
        super().data_received(data)
        if continuing and self.in_header_block and not self.refused:
            # All of this read lies inside one unfinished header block (begun in an earlier
            # read, not ended in this one): count it whole, though no field is complete yet --
            # a single endless header value is buffered by the parser until it ends.
            self.read_inside_block += len(data)
            self._check_size(self.read_inside_block)

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may start a pipelined request: self.cycle is then it
        answered = self.cycle is None or self.cycle.response_complete
        if answered and not self.in_header_block and not self.transport.is_closing():
            self._close_in(self._held(self.limits.keep_alive_seconds))

    # Parser callbacks (while a refusal is out, the rest of the read is ignored)

    def on_message_begin(self) -> None:
        if self.refused:
            return
        self._stop(self.closer)
        self.closer = None
        super().on_message_begin()
        self.in_header_block = True
        self.header_bytes = self.read_inside_block = self.header_fields = 0
        self.header_deadline = self.loop.call_later(
            self._held(self.limits.header_timeout_seconds), self._headers_too_slow
        )

    def on_url(self, url: bytes) -> None:
        if self.refused:
            return
        self.header_bytes += len(url)
        if self._check_size(self.header_bytes):
            super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.refused:
            return
        self.header_fields += 1
        self.header_bytes += len(name) + len(value) + 4  # ": " and CRLF
        if self.header_fields > self.limits.max_headers:
            self._refuse(
                Refusal(
                    431,
                    "Request Header Fields Too Large",
                    "request-header-fields-too-large",
                    f"the request has more than {self.limits.max_headers} header fields "
                    "(HERALD_API_MAX_HEADERS)",
                )
            )
        elif self._check_size(self.header_bytes):
            super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self.refused:
            return
        self.in_header_block = False
        self._stop(self.header_deadline)
        self.header_deadline = None
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self.refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self.refused:
            super().on_message_complete()

    # The limits

    def _close_in(self, seconds: float) -> None:
        self._stop(self.closer)
        self.closer = self.loop.call_later(seconds, self._close)

    def _check_size(self, size: int) -> bool:
        """Whether the header block is within its limit; refused when it is not."""
        if size <= self.limits.max_header_bytes:
            return True
        self._refuse(
            Refusal(
                431,
                "Request Header Fields Too Large",
                "request-header-fields-too-large",
                f"the request's line and headers exceed {self.limits.max_header_bytes} bytes "
                "(HERALD_API_MAX_HEADER_BYTES)",
            )
        )
        return False

    def _headers_too_slow(self) -> None:
        self.header_deadline = None
        if self.cycle is not None and not self.cycle.response_complete:
            self._close()  # a pipelined request's answer is still being written: no room for ours
            return
        self._refuse(
            Refusal(
                408,
                "Request Timeout",
                "request-timeout",
                "the request's line and headers did not all arrive in time "
                f"(HERALD_API_HEADER_TIMEOUT_SECONDS, {self.limits.header_timeout_seconds:g} s; "
                f"{PRESSED_SECONDS:g} s while the server is busy)",
            )
        )

    def _refuse(self, refusal: Refusal) -> None:
        self.refused = True
        self.in_header_block = False
        self._stop(self.header_deadline)
        log.info("api.request_refused", status=refusal.status, reason=refusal.detail)
        if self.transport.is_closing():
            return
        self.transport.write(refusal.response())
        if not self.transport.can_write_eof():  # TLS: no half-close
            self.transport.close()
            return
        self.transport.write_eof()
        self._close_in(self._held(self.limits.keep_alive_seconds))  # the linger, if it lingers

    def _close(self) -> None:
        if not self.transport.is_closing():
            self.transport.close()

    @staticmethod
    def _stop(timer: asyncio.TimerHandle | None) -> None:
        if timer is not None:
            timer.cancel()
