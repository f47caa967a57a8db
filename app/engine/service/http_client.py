"""The attempts' HTTP client: a POST to an address the SSRF guard vetted, directly or through
an egress proxy, on a pooled connection (connections.py).

What it guarantees, each in one place below: it connects only to an address it vetted (a name
is resolved here, every address judged, and the connection made to the address itself: no
second lookup, so no rebinding); a pooled connection is reused only for the route it was made
for -- the address it reached, the name, the TLS context, the proxy and its credentials; it
follows no redirect (an answer is an answer); the TLS server name and the certificate check
are the URL's name, never the address; and ``open_request`` returns exactly when the request
has been written -- the unknown-outcome rule turns on that moment. Deadlines and the answer's
cap are the caller's (sender.py).

Why not aiohttp: most of an attempt's CPU was its request machinery, for features an attempt
never uses (docs/decisions.md, "Attempts speak HTTP/1.1 themselves").
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

from yarl import URL

from app.core.proxies import EgressProxy
from app.endpoints.service.destinations import IPAddress, IPNetwork
from app.engine.service.connections import Answer, Connection, Disconnected, MalformedAnswer
from app.engine.service.names import DestinationBlocked, Names, ResolveFailed
from app.engine.service.pool import Pool

__all__ = ["DestinationBlocked", "Exchange", "HttpClient", "ResolveFailed"]

# What the client sets itself, and what would change how the request is framed: a header of
# these names in what it is given (a row written behind the API's back) is refused.
_FRAMING = frozenset(
    {
        "host", "content-length", "transfer-encoding", "connection", "keep-alive", "te",
        "trailer", "upgrade", "expect", "proxy-connection", "proxy-authorization",
    }
)  # fmt: skip


class ConnectFailed(OSError):
    """No connection to the receiver (refused, unreachable, TLS handshake failed, closed
    before the request was written)."""

    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.cause = cause


class ProxyFailed(Exception):
    """The egress proxy could not be reached or resolved, broke off, or refused the CONNECT
    (``status``)."""

    def __init__(self, status: int | None) -> None:
        super().__init__(
            "unreachable" if status is None else f"refused the CONNECT (HTTP {status})"
        )
        self.status = status


class InvalidRequest(ValueError):
    """What is stored cannot make a request (a URL yarl refuses, a header with a line break)."""


class LeaseEndedBeforeWriting(Exception):
    """The connection was ready only after the lease's last moment to start: the request is
    not written (another worker may hold the delivery by now)."""


@dataclass(frozen=True)
class Target:
    """A URL taken apart once: where it goes, and how the request names it."""

    https: bool
    host: str  # as on the wire: IDNA, no brackets
    port: int
    authority: str  # the Host header
    path: str  # origin form: path and query

    @classmethod
    def parse(cls, url: str) -> Target:
        try:
            parsed = URL(url)
            host, port = parsed.raw_host or "", parsed.port
        except (ValueError, TypeError) as exc:  # yarl: a port out of range, a broken literal
            raise InvalidRequest(f"invalid URL: {exc}") from None
        if parsed.scheme not in ("http", "https") or not host or port is None:
            raise InvalidRequest("invalid URL: not http(s)://host/...")
        https = parsed.scheme == "https"
        authority = _authority(host, port, 443 if https else 80)
        return cls(https, host, port, authority, parsed.raw_path_qs or "/")


def _authority(host: str, port: int, default_port: int | None = None) -> str:
    name = f"[{host}]" if ":" in host else host
    return name if port == default_port else f"{name}:{port}"


def request_head(
    line: str, authority: str, headers: Mapping[str, str], length: int | None
) -> bytes:
    """The request line and headers. A line break or NUL would end a header early and smuggle
    another: refused, never written (the endpoint's headers are checked at save too; a token
    endpoint's answer is not)."""
    lines = [line, f"Host: {authority}"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    lines += [f"{name}: {value}" for name, value in headers.items()]
    for text in lines:
        if "\r" in text or "\n" in text or "\x00" in text:
            raise InvalidRequest("a header or the URL holds a line break")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape")


def _refuse_framing(headers: Mapping[str, str]) -> None:
    for name in headers:
        if name.lower() in _FRAMING:
            raise InvalidRequest(f"the header {name} is Herald's to set")


Connect = Callable[[], Awaitable[Connection]]


class HttpClient:
    """One per worker process (and one for the API's endpoint tests)."""

    def __init__(self, allowlist: Sequence[IPNetwork], max_connections: int) -> None:
        self._names = Names(allowlist)
        self._pool = Pool(max_connections)
        # The system's trust store (SSL_CERT_FILE too), with hostname checks.
        self._verified = ssl.create_default_context()

    async def open_request(
        self,
        url: str,
        headers: Mapping[str, str],
        body: bytes,
        *,
        proxy: EgressProxy | None = None,
        tls: ssl.SSLContext | None = None,
        write_by: float | None = None,
        cap: int,
    ) -> Exchange:
        """Connect (or take a pooled connection) and write the POST; returned once written.
        Raises before writing: InvalidRequest, DestinationBlocked, ResolveFailed,
        ConnectFailed, ProxyFailed, LeaseEndedBeforeWriting."""
        target = Target.parse(url)
        context = (tls or self._verified) if target.https else None
        _refuse_framing(headers)
        if proxy is None:
            head, keys, connect = await self._direct(target, context, headers, len(body))
        else:
            head, keys, connect = await self._proxied(target, context, proxy, headers, len(body))
        connection = await self._pool.acquire(keys, connect)
        try:
            if write_by is not None and asyncio.get_running_loop().time() > write_by:
                # Nothing but CPU stands between here and the first byte: a worker frozen
                # while it connected cannot write a request its lease no longer covers.
                raise LeaseEndedBeforeWriting("the lease ended before the request was written")
            try:
                connection.send(head + body, cap)
            except Disconnected as exc:  # closed by the receiver between its use and ours
                raise ConnectFailed(f"cannot connect to {target.host}: {exc}", exc) from None
        except BaseException:
            self._pool.release(connection)
            raise
        return Exchange(self._pool, connection)

    async def _direct(
        self,
        target: Target,
        context: ssl.SSLContext | None,
        headers: Mapping[str, str],
        length: int,
    ) -> tuple[bytes, list[Hashable], Connect]:
        head = request_head(f"POST {target.path} HTTP/1.1", target.authority, headers, length)
        addresses = await self._names.vetted(target.host, target.port)

        def key(address: IPAddress) -> Hashable:
            # The name too: a connection made for one name is never another name's.
            return (str(address), target.port, context, target.host)

        async def connect() -> Connection:
            return await _connect(key, addresses, target.port, target.host, context)

        return head, [key(address) for address in addresses], connect

    async def _proxied(
        self,
        target: Target,
        context: ssl.SSLContext | None,
        proxy: EgressProxy,
        headers: Mapping[str, str],
        length: int,
    ) -> tuple[bytes, list[Hashable], Connect]:
        """Through ``proxy``, asking it for the address vetted here -- never the name, so the
        proxy has nothing to resolve (egress.py). An endpoint's own proxy is itself vetted
        and reached at its address; the operator's is trusted wherever it is, and its failures
        are Herald's (ProxyFailed), not the receiver's."""
        proxy_url = URL(proxy.url)
        proxy_host, proxy_port = proxy_url.raw_host or "", proxy_url.port or 80
        try:
            proxies = await self._names.vetted(proxy_host, proxy_port, trusted=proxy.trusted)
        except DestinationBlocked as exc:
            raise DestinationBlocked(f"egress proxy: {exc}") from None
        except ResolveFailed as exc:
            if proxy.trusted:
                raise ProxyFailed(None) from None
            raise ResolveFailed(f"egress proxy: {exc}") from None
        address = (await self._names.vetted(target.host, target.port))[0]
        pinned = _authority(str(address), target.port)
        if context is not None:  # inside the tunnel: the name for SNI, the check and Host
            head = request_head(f"POST {target.path} HTTP/1.1", target.authority, headers, length)
        else:
            # Plain http in absolute form, the address as Host: no name reaches the proxy at
            # all; the proxy's credentials are its to read (and to strip).
            line = f"POST http://{pinned}{target.path} HTTP/1.1"
            head = request_head(line, pinned, {**headers, **proxy.headers}, length)
        # The proxy's credentials and trust are part of the route: a tunnel one opened is
        # never another's.
        identity = (proxy.url, proxy.trusted, tuple(sorted(proxy.headers.items())))

        def key(proxy_address: IPAddress) -> Hashable:
            return (identity, str(proxy_address), proxy_port, pinned, context, target.host)

        async def connect() -> Connection:
            return await _through(key, proxy, proxies, proxy_port, pinned, context, target.host)

        return head, [key(proxy_address) for proxy_address in proxies], connect

    def close(self) -> None:
        self._pool.close()


async def _connect(
    key: Callable[[IPAddress], Hashable],
    addresses: Sequence[IPAddress],
    port: int,
    name: str,
    context: ssl.SSLContext | None,
) -> Connection:
    """To each vetted address in turn until one takes the connection, keyed by the one that
    did; over TLS, ``name`` is the server name and the name the certificate must hold.
    Failures name the host as the tenant wrote it, never the address it resolved to."""
    loop = asyncio.get_running_loop()
    failure: OSError | None = None
    for address in addresses:
        try:
            _, connection = await loop.create_connection(
                functools.partial(Connection, key(address)),
                str(address),
                port,
                ssl=context,
                server_hostname=name if context else None,
            )
            return connection
        except ssl.SSLError as exc:
            failure = exc
            break  # the receiver was reached: another address would fail the same way
        except OSError as exc:
            failure = exc
    assert failure is not None
    raise ConnectFailed(f"cannot connect to {name}:{port}: {_said(failure)}", failure)


async def _through(
    key: Callable[[IPAddress], Hashable],
    proxy: EgressProxy,
    proxies: Sequence[IPAddress],
    proxy_port: int,
    pinned: str,
    context: ssl.SSLContext | None,
    name: str,
) -> Connection:
    """A connection to the proxy; for https, a tunnel to ``pinned`` and TLS inside. Until the
    tunnel is up, whatever fails is the proxy's."""
    try:
        connection = await _connect(key, proxies, proxy_port, "", None)
    except ConnectFailed:
        raise ProxyFailed(None) from None
    if context is None:
        return connection
    try:
        try:
            line = f"CONNECT {pinned} HTTP/1.1"
            connection.send(request_head(line, pinned, proxy.headers, None), 0)
            answer: Answer = await connection.answer()
        except (OSError, MalformedAnswer):
            raise ProxyFailed(None) from None
        if answer.status != 200:
            raise ProxyFailed(answer.status)
        connection.tunnel()
        assert connection.transport is not None
        try:
            transport = await asyncio.get_running_loop().start_tls(
                connection.transport, connection, context, server_hostname=name
            )
        except OSError as exc:  # ssl.SSLError among them: the receiver's TLS
            raise ConnectFailed(f"cannot connect to {name}: {_said(exc)}", exc) from None
        if transport is None:
            raise ProxyFailed(None)
        connection.transport = transport
        return connection
    except BaseException:
        connection.close()
        raise


class Exchange:
    """A request written, its answer to come. ``release()`` hands the connection back (kept
    only if the answer was read whole); call it however the exchange ended."""

    def __init__(self, pool: Pool, connection: Connection) -> None:
        self._pool = pool
        self._connection = connection

    async def answer(self) -> Answer:
        """The status and the headers acted on; raises an OSError subclass (the connection
        ended), MalformedAnswer."""
        return await self._connection.answer()

    async def body(self) -> bytes:
        return await self._connection.body()

    def release(self) -> None:
        self._pool.release(self._connection)


def _said(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {exc.verify_message}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
