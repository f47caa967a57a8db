"""The sender's side of the CloudEvents webhook validation handshake (HTTP 1.1 Web Hooks for
Event Delivery, section 4.1-4.2): an ``OPTIONS`` to the exact URL being registered, carrying
``WebHook-Request-Origin`` and, if the endpoint has a ceiling, ``WebHook-Request-Rate``;
consent is ``WebHook-Allowed-Origin`` naming that origin or ``*`` -- never a status code, which
the spec says a handshake cannot rely on. It goes the way an attempt goes: the SSRF guard, the
endpoint's TLS material, its proxy or the operator's, pinned to the vetted address.

The asynchronous grant by callback (``WebHook-Request-Callback``, optional for a sender) is not
offered: a receiver consents in its answer, or the save is refused."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import aiohttp
from yarl import URL

from app.core import certificates
from app.core.errors import DestinationRefused, Unprocessable
from app.core.proxies import EgressProxy
from app.endpoints.service.destinations import IPNetwork
from app.endpoints.service.handshakes import Consent, HandshakeTarget
from app.engine.service import egress
from app.engine.service.http_client import DestinationBlocked
from app.engine.service.http_session import vet_literal

REQUEST_ORIGIN = "WebHook-Request-Origin"
REQUEST_RATE = "WebHook-Request-Rate"
ALLOWED_ORIGIN = "WebHook-Allowed-Origin"
ALLOWED_RATE = "WebHook-Allowed-Rate"
# A consent is a few headers; a receiver's answer body is not read beyond this.
_MAX_BODY = 4096


class NoConsent(Unprocessable):
    """The receiver did not consent: the save is refused, and says what it answered."""

    title, slug = "The receiver did not consent to deliveries", "no-consent"


def _refused(why: str) -> NoConsent:
    return NoConsent(f"url: the receiver did not consent to deliveries (webhook handshake): {why}")


def consent_of(headers: Any, status: int, target: HandshakeTarget, origin: str) -> Consent:
    """What an answer's headers grant; raises NoConsent, saying why, when they grant nothing."""
    allowed = headers.get(ALLOWED_ORIGIN)
    if allowed is None:
        raise _refused(f"HTTP {status} without {ALLOWED_ORIGIN}")
    if allowed.strip().lower() not in ("*", origin.lower()):  # DNS names know no case
        raise _refused(f"{ALLOWED_ORIGIN} names another origin than {origin!r}")
    rate = headers.get(ALLOWED_RATE)
    if rate is None:
        # MUST be answered when a rate was asked for: the rate asked for is then the most
        # the receiver can be taken to have agreed to.
        return Consent(target.url, origin, target.request_rate)
    rate = rate.strip()
    if rate == "*":
        return Consent(target.url, origin, None)
    if not (rate.isascii() and rate.isdigit()) or len(rate) > 9 or int(rate) < 1:
        raise _refused(f"{ALLOWED_RATE} is neither * nor a positive number of requests a minute")
    return Consent(target.url, origin, int(rate))


async def handshake(
    http: aiohttp.ClientSession,
    target: HandshakeTarget,
    *,
    origin: str,
    allowlist: Sequence[IPNetwork],
    operator_proxy: EgressProxy | None,
    timeout: float,
) -> Consent:
    """Ask ``target``'s receiver; its Consent, or NoConsent (DestinationRefused: the guard)."""
    url = target.url
    headers = {**target.headers, REQUEST_ORIGIN: origin}
    if target.request_rate is not None:
        headers[REQUEST_RATE] = str(target.request_rate)
    proxy = operator_proxy
    if target.proxy_url is not None:
        proxy = EgressProxy.parse(target.proxy_url, trusted=False)
    tls = certificates.context(target.tls) if target.tls is not None else None
    through: dict[str, Any] = {}
    try:
        async with asyncio.timeout(timeout):
            if proxy is None:
                vet_literal(URL(url).raw_host or "", allowlist)
            else:
                routed = await egress.route(url, headers, allowlist, proxy)
                url, headers, through = routed.url, routed.headers, routed.through
            async with http.options(
                url,
                headers=headers,
                allow_redirects=False,
                ssl=tls if tls is not None else True,
                **through,
            ) as response:
                await response.content.read(_MAX_BODY)
                return consent_of(response.headers, response.status, target, origin)
    except (DestinationBlocked, DestinationRefused) as exc:
        raise DestinationRefused(str(exc)) from None
    except TimeoutError:
        raise _refused(f"no answer in {timeout:g} s") from None
    except egress.ResolveFailed as exc:
        raise _refused(str(exc)) from None
    except (aiohttp.ClientError, OSError, ValueError) as exc:  # ValueError: an IDNA label
        raise _refused(f"{type(exc).__name__}") from None
