"""OAuth2 access tokens for endpoints with client credentials (RFC 6749 4.4), one cache per
worker process: a token is fetched once for a burst of attempts (the first asks, the rest wait
for its answer), kept until shortly before its ``expires_in``, and dropped when the receiver
answers 401 to it. The token endpoint is reached through the attempts' own HTTP session: the
same SSRF guard, the same bounds on time and bytes read."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote_plus

import aiohttp
from yarl import URL

from app.core.errors import DestinationRefused
from app.core.proxies import EgressProxy
from app.core.sealing import OpenedSecrets, SealedValueError, endpoint_purpose
from app.endpoints.service.destinations import IPNetwork
from app.engine.repository.delivery_leases import ClaimedDelivery, OAuth2Client
from app.engine.service import egress
from app.engine.service.http_client import DestinationBlocked
from app.engine.service.http_session import read_capped, vet_literal
from app.engine.service.sender import MAX_RESPONSE_BYTES

# A token endpoint's answer is given at most this long, and no longer than an attempt.
TOKEN_TIMEOUT_SECONDS = 10.0
# Without expires_in (RFC 6749 calls it RECOMMENDED), a token is kept this long.
DEFAULT_LIFETIME_SECONDS = 300.0
CAPACITY = 10_000


class TokenFailed(Exception):
    """No token: the message says why in words a tenant may read (never the secret, never the
    token endpoint's body, which may echo it)."""


class FetchCutShort(TokenFailed):
    """The attempt that was fetching a token was cancelled: nothing is known of the token
    endpoint, and whoever waited on it fetches for itself."""


@dataclass(frozen=True)
class Token:
    value: str = field(repr=False)
    fresh: bool  # fetched for this attempt (a 401 to it is the receiver's verdict)


def _cache_key(claimed: ClaimedDelivery, client: OAuth2Client) -> tuple[object, ...]:
    # The sealed secret is part of the key: new credentials are a new entry, never stale.
    return (
        claimed.endpoint_id,
        client.token_url,
        client.client_id,
        client.scope,
        client.audience,
        client.sealed_secret,
    )


def refresh_after(expires_in: float) -> float:
    """Seconds a token is used for: its lifetime less a margin (a tenth, at most a minute), so
    that no attempt starts with a token about to expire on the way."""
    return max(0.0, expires_in - min(60.0, expires_in / 10))


class Tokens:
    def __init__(
        self,
        http: aiohttp.ClientSession,
        opened: OpenedSecrets,
        allowlist: Sequence[IPNetwork],
        timeout: float,
        proxy: EgressProxy | None = None,
    ) -> None:
        self._http = http
        self._opened = opened
        self._allowlist = tuple(allowlist)
        self._timeout = min(timeout, TOKEN_TIMEOUT_SECONDS)
        self._proxy = proxy
        self._tokens: OrderedDict[tuple[object, ...], tuple[str, float]] = OrderedDict()
        self._fetching: dict[tuple[object, ...], asyncio.Future[str]] = {}
        self.fetches = 0  # token requests made by this process

    async def bearer(self, claimed: ClaimedDelivery, proxy: EgressProxy | None = None) -> Token:
        """A token for ``claimed``'s endpoint: the cached one while it is good, else one fetch
        shared by every attempt that asks meanwhile -- through ``proxy``, the endpoint's
        attempts' proxy (default: the operator's)."""
        client = claimed.oauth2
        assert client is not None
        key = _cache_key(claimed, client)
        cached = self._tokens.get(key)
        if cached is not None and time.monotonic() < cached[1]:
            self._tokens.move_to_end(key)
            return Token(cached[0], fresh=False)
        waiting = self._fetching.get(key)
        if waiting is not None:
            try:
                return Token(await asyncio.shield(waiting), fresh=True)
            except FetchCutShort:
                return await self.bearer(claimed, proxy)  # its asker went away: ask ourselves
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._fetching[key] = future
        try:
            value, lifetime = await self._fetch(claimed.endpoint_id, client, proxy or self._proxy)
        except BaseException as exc:
            # Whatever ends the fetch ends it for those waiting too (a cancelled fetch must
            # not leave them waiting, nor look like their own cancellation).
            shared = exc if isinstance(exc, TokenFailed) else FetchCutShort("token fetch cut short")
            future.set_exception(shared)
            future.exception()  # retrieved: a burst with no one else waiting logs nothing
            raise
        finally:
            del self._fetching[key]
        self._tokens[key] = (value, time.monotonic() + refresh_after(lifetime))
        if len(self._tokens) > CAPACITY:
            self._tokens.popitem(last=False)
        future.set_result(value)
        return Token(value, fresh=True)

    def forget(self, claimed: ClaimedDelivery, value: str) -> None:
        """The receiver refused ``value`` (401): the next attempt fetches a new one -- unless
        another attempt has already put a newer token in its place."""
        assert claimed.oauth2 is not None
        key = _cache_key(claimed, claimed.oauth2)
        cached = self._tokens.get(key)
        if cached is not None and cached[0] == value:
            del self._tokens[key]

    async def _fetch(
        self, endpoint_id: str, client: OAuth2Client, proxy: EgressProxy | None
    ) -> tuple[str, float]:
        try:
            secret = self._opened.open_text(
                client.sealed_secret, endpoint_purpose(endpoint_id, "oauth2")
            )
        except SealedValueError as exc:
            raise TokenFailed(f"the OAuth2 client secret: {exc}") from None
        # RFC 6749 2.3.1: each part form-encoded, then HTTP Basic.
        basic = f"{quote_plus(client.client_id)}:{quote_plus(secret)}".encode()
        form = {"grant_type": "client_credentials"}
        if client.scope:
            form["scope"] = client.scope
        if client.audience:
            form["audience"] = client.audience
        self.fetches += 1
        url = client.token_url
        headers = {
            "Authorization": "Basic " + base64.b64encode(basic).decode(),
            "Accept": "application/json",
        }
        through: dict[str, Any] = {}
        try:
            async with asyncio.timeout(self._timeout):
                if proxy is None:
                    vet_literal(URL(url).host or "", self._allowlist)
                else:  # as an attempt goes: pinned to the vetted address
                    routed = await egress.route(url, headers, self._allowlist, proxy)
                    url, headers, through = routed.url, routed.headers, routed.through
                async with self._http.post(
                    url,
                    data=form,
                    headers=headers,
                    allow_redirects=False,
                    **through,
                ) as response:
                    body = await read_capped(response, MAX_RESPONSE_BYTES)
                    status = response.status
        except (DestinationBlocked, DestinationRefused) as exc:
            raise TokenFailed(f"token endpoint refused by the SSRF guard: {exc}") from None
        except TimeoutError:
            raise TokenFailed(f"token endpoint: no answer in {self._timeout:g} s") from None
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            raise TokenFailed(f"token endpoint: {type(exc).__name__}") from None
        if status != 200:
            raise TokenFailed(f"token endpoint: HTTP {status}")
        return _token_of(body)


def _token_of(body: bytes) -> tuple[str, float]:
    """The access token and its lifetime from a token endpoint's answer (RFC 6749 5.1)."""
    try:
        answer = json.loads(body)
    except ValueError:
        raise TokenFailed("token endpoint: the answer is not JSON") from None
    if not isinstance(answer, dict):
        raise TokenFailed("token endpoint: the answer is not a JSON object")
    value = answer.get("access_token")
    if not isinstance(value, str) or not value or not value.isascii() or not value.isprintable():
        raise TokenFailed("token endpoint: no usable access_token in the answer")
    kind = answer.get("token_type")
    if not isinstance(kind, str) or kind.lower() != "bearer":
        raise TokenFailed("token endpoint: the token is not a bearer token")
    expires_in = answer.get("expires_in", DEFAULT_LIFETIME_SECONDS)
    if isinstance(expires_in, str) and expires_in.isdecimal():
        expires_in = int(expires_in)  # some endpoints answer it quoted
    if not isinstance(expires_in, int | float) or isinstance(expires_in, bool) or expires_in < 0:
        raise TokenFailed("token endpoint: expires_in is not a number of seconds")
    return value, float(min(expires_in, 86_400 * 365))
