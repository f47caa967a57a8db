"""The attempts' HTTP client: a POST to an address the SSRF guard vetted, directly or through
an egress proxy, on a pooled connection (connections.py).

What it guarantees, each in one place below: it connects only to the address it vetted (a
name is resolved here, every address judged, and the connection made to the address itself:
no second lookup, so no rebinding); it follows no redirect (an answer is an answer); the TLS
server name and the certificate check are the URL's name, never the address; and
``open_request`` returns exactly when the request has been written -- the unknown-outcome rule
turns on that moment. Deadlines and the answer's cap are the caller's (sender.py).

Why not aiohttp: most of an attempt's CPU was its request machinery, for features an attempt
never uses (docs/decisions.md, "Attempts speak HTTP/1.1 themselves").
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from yarl import URL

from app.core.errors import DestinationRefused
from app.core.proxies import EgressProxy
from app.endpoints.service.destinations import IPAddress, IPNetwork, refusal, resolve
from app.engine.service.connections import Answer, Connection, Pool

# How long a name's vetted addresses are used before it is resolved again.
NAMES_SECONDS = 10.0


class DestinationBlocked(Exception):
    """The SSRF guard refused the destination: a refusal is its own outcome (``blocked``)."""


class ResolveFailed(Exception):
    """The name did not resolve just now: a lookup to try again later, not a refusal."""


class ConnectFailed(OSError):
    """No connection to the receiver (refused, unreachable, TLS handshake failed)."""

    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.cause = cause


class ProxyFailed(Exception):
    """The egress proxy could not be reached (``status`` None) or refused the CONNECT."""

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


class Names:
    """Names resolved and vetted, kept ``NAMES_SECONDS``; one lookup at a time per name."""

    def __init__(self, allowlist: Sequence[IPNetwork]) -> None:
        self._allowlist = tuple(allowlist)
        self._known: dict[tuple[str, int], tuple[float, asyncio.Future[list[IPAddress]]]] = {}

    async def vetted(self, host: str, port: int, *, trusted: bool = False) -> list[IPAddress]:
        """``host``'s addresses, every one of them allowed -- unless ``trusted``, the
        operator's proxy, reached wherever it is. Raises DestinationBlocked, ResolveFailed."""
        literal = _literal(host)
        addresses = [literal] if literal is not None else await self._resolved(host, port)
        if not trusted:
            # `refusal` never names the address a name resolved to: the tenant reads this.
            refused = refusal(host, addresses, self._allowlist)
            if refused is not None:
                raise DestinationBlocked(refused)
        return addresses

    async def _resolved(self, host: str, port: int) -> list[IPAddress]:
        now = time.monotonic()
        known = self._known.get((host, port))
        if known is None or known[0] < now or (known[1].done() and known[1].exception()):
            if len(self._known) > 4096:
                self._known = {k: v for k, v in self._known.items() if v[0] >= now}
            lookup = asyncio.ensure_future(resolve(host, port))
            known = (now + NAMES_SECONDS, lookup)
            self._known[(host, port)] = known
        try:
            return await asyncio.shield(known[1])
        except DestinationRefused as exc:
            raise ResolveFailed(str(exc)) from None


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


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
        name = f"[{host}]" if ":" in host else host
        authority = name if port == (443 if https else 80) else f"{name}:{port}"
        return cls(https, host, port, authority, parsed.raw_path_qs or "/")


def request_head(
    line: str, authority: str, headers: Mapping[str, str], length: int | None
) -> bytes:
    """The request line and headers. A line break or NUL would end a header early and smuggle
    another: refused, never written (the endpoint's headers are checked at save too; a token
    endpoint's answer is not)."""
    lines = [line, f"Host: {authority}"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    for name, value in headers.items():
        if name.lower() in ("host", "content-length"):
            continue  # Herald's own, above
        lines.append(f"{name}: {value}")
    for text in lines:
        if "\r" in text or "\n" in text or "\x00" in text:
            raise InvalidRequest("a header or the URL holds a line break")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape")


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
        if proxy is None:
            connection = await self._direct(target, context)
            line = f"POST {target.path} HTTP/1.1"
            authority = target.authority
        else:
            connection, line, authority, headers = await self._proxied(
                target, context, proxy, headers
            )
        try:
            head = request_head(line, authority, headers, len(body))
            if write_by is not None and asyncio.get_running_loop().time() > write_by:
                # Nothing but CPU stands between here and the first byte: a worker frozen
                # while it connected cannot write a request its lease no longer covers.
                raise LeaseEndedBeforeWriting("the lease ended before the request was written")
        except BaseException:
            self._pool.release(connection)
            raise
        connection.send(head + body, cap)
        return Exchange(self._pool, connection)

    async def _direct(self, target: Target, context: ssl.SSLContext | None) -> Connection:
        addresses = await self._names.vetted(target.host, target.port)
        # The name, never the address, is what TLS checks: SNI and the certificate.
        key = (str(addresses[0]), target.port, context, target.host if context else None)
        return await self._pool.acquire(
            key, lambda: _connect(key, addresses, target.port, target.host, context)
        )

    async def _proxied(
        self,
        target: Target,
        context: ssl.SSLContext | None,
        proxy: EgressProxy,
        headers: Mapping[str, str],
    ) -> tuple[Connection, str, str, Mapping[str, str]]:
        """Through ``proxy``, asking it for the address vetted here -- never the name, so the
        proxy has nothing to resolve (egress.py). An endpoint's own proxy is itself vetted
        and reached at its address; the operator's is trusted wherever it is."""
        proxy_url = URL(proxy.url)
        proxy_host, proxy_port = proxy_url.raw_host or "", proxy_url.port or 80
        try:
            proxy_addresses = await self._names.vetted(
                proxy_host, proxy_port, trusted=proxy.trusted
            )
        except DestinationBlocked as exc:
            raise DestinationBlocked(f"egress proxy: {exc}") from None
        except ResolveFailed as exc:
            raise ResolveFailed(f"egress proxy: {exc}") from None
        address = (await self._names.vetted(target.host, target.port))[0]
        pinned = f"[{address}]" if address.version == 6 else str(address)
        pinned_authority = f"{pinned}:{target.port}"
        key = (proxy.url, str(proxy_addresses[0]), pinned_authority, context, target.host)
        connection = await self._pool.acquire(
            key,
            lambda: _through(key, proxy, proxy_addresses, pinned_authority, context, target.host),
        )
        if context is not None:  # inside the tunnel: the name for SNI, the check and Host
            return connection, f"POST {target.path} HTTP/1.1", target.authority, headers
        # Plain http in absolute form, the address as Host: no name reaches the proxy at
        # all; the proxy's credentials are its to read (and to strip).
        line = f"POST http://{pinned_authority}{target.path} HTTP/1.1"
        return connection, line, pinned_authority, {**headers, **proxy.headers}

    def close(self) -> None:
        self._pool.close()


async def _connect(
    key: object,
    addresses: Sequence[IPAddress],
    port: int,
    name: str,
    context: ssl.SSLContext | None,
) -> Connection:
    """To each vetted address in turn until one takes the connection; over TLS, ``name`` is
    the server name and the name the certificate must hold. Failures name the host as the
    tenant wrote it, never the address it resolved to."""
    loop = asyncio.get_running_loop()
    failure: OSError | None = None
    for address in addresses:
        try:
            _, connection = await loop.create_connection(
                lambda: Connection(key),
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
    key: object,
    proxy: EgressProxy,
    proxy_addresses: Sequence[IPAddress],
    pinned_authority: str,
    context: ssl.SSLContext | None,
    name: str,
) -> Connection:
    """A connection to the proxy; for https, a tunnel to ``pinned_authority`` and TLS inside."""
    try:
        connection = await _connect(key, proxy_addresses, URL(proxy.url).port or 80, "", None)
    except ConnectFailed:
        raise ProxyFailed(None) from None
    if context is None:
        return connection
    try:
        line = f"CONNECT {pinned_authority} HTTP/1.1"
        connection.send(request_head(line, pinned_authority, proxy.headers, None), 0)
        answer: Answer = await connection.answer()
        if answer.status != 200:
            raise ProxyFailed(answer.status)
        connection.tunnel()
        assert connection.transport is not None
        try:
            transport = await asyncio.get_running_loop().start_tls(
                connection.transport, connection, context, server_hostname=name
            )
        except OSError as exc:  # ssl.SSLError among them
            raise ConnectFailed(f"cannot connect to {name}: {_said(exc)}", exc) from None
        connection.transport = cast(asyncio.Transport, transport)
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
