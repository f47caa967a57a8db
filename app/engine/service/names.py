"""Destination names resolved and vetted for the attempts' client (http_client.py): the
address vetted is the address connected to, and a name is looked up at most once per
``NAMES_SECONDS`` however many attempts go to it."""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections import OrderedDict
from collections.abc import Sequence

from app.core.errors import DestinationRefused
from app.endpoints.service.destinations import IPAddress, IPNetwork, refusal, resolve

# How long a name's addresses are used before it is resolved again.
NAMES_SECONDS = 10.0
# Names kept at most: past it the oldest go first, so a tenant naming many hosts costs a
# lookup each, never memory or a walk over the others.
NAMES_KEPT = 4096


class DestinationBlocked(Exception):
    """The SSRF guard refused the destination: a refusal is its own outcome (``blocked``)."""


class ResolveFailed(Exception):
    """The name did not resolve just now: a lookup to try again later, not a refusal."""


class Names:
    """Names resolved and vetted, kept ``NAMES_SECONDS``; one lookup at a time per name."""

    def __init__(self, allowlist: Sequence[IPNetwork]) -> None:
        self._allowlist = tuple(allowlist)
        # host -> (when it expires, its lookup), oldest first.
        self._known: OrderedDict[str, tuple[float, asyncio.Future[list[IPAddress]]]] = OrderedDict()

    async def vetted(self, host: str, port: int, *, trusted: bool = False) -> list[IPAddress]:
        """``host``'s addresses, every one of them allowed -- unless ``trusted``, the
        operator's proxy, reached wherever it is. Raises DestinationBlocked, ResolveFailed."""
        literal = literal_address(host)
        addresses = [literal] if literal is not None else await self._resolved(host, port)
        if not trusted:
            # `refusal` never names the address a name resolved to: the tenant reads this.
            refused = refusal(host, addresses, self._allowlist)
            if refused is not None:
                raise DestinationBlocked(refused)
        return addresses

    async def _resolved(self, host: str, port: int) -> list[IPAddress]:
        now = time.monotonic()
        known = self._known.get(host)
        failed = known is not None and known[1].done() and known[1].exception() is not None
        if known is None or known[0] < now or failed:
            self._known.pop(host, None)
            while self._known and (
                len(self._known) >= NAMES_KEPT or next(iter(self._known.values()))[0] < now
            ):
                self._known.popitem(last=False)
            lookup = asyncio.ensure_future(resolve(host, port))
            lookup.add_done_callback(_retrieved)  # its callers may all have given up
            known = (now + NAMES_SECONDS, lookup)
            self._known[host] = known
        try:
            # Shielded: one caller's deadline does not cancel the lookup the others share.
            return await asyncio.shield(known[1])
        except DestinationRefused as exc:
            raise ResolveFailed(str(exc)) from None


def literal_address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _retrieved(lookup: asyncio.Future[list[IPAddress]]) -> None:
    if not lookup.cancelled():
        lookup.exception()
