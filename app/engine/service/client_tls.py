"""The worker's TLS contexts for endpoints with TLS material (mutual TLS, a CA of their own):
made once per process per sealed value, as secrets are opened once (app/core/sealing.py) -- a
replacement writes new sealed bytes, so nothing here is ever stale."""

from __future__ import annotations

import json
import ssl
from collections import OrderedDict

from app.core import certificates
from app.core.sealing import KeyRing, OpenedSecrets, SealedValueError, endpoint_purpose
from app.engine.repository.delivery_leases import ClaimedDelivery
from app.engine.service.envelope import RequestNotBuilt

# An SSLContext holds its trust store: a few hundred KiB with the system's. Endpoints with TLS
# material are few; the least recently used context goes first beyond this.
CONTEXTS_KEPT = 256


def _context(opened: str) -> ssl.SSLContext:
    return certificates.context(certificates.ClientTLS.load(json.loads(opened)))


class ClientContexts:
    def __init__(self, ring: KeyRing, capacity: int = CONTEXTS_KEPT) -> None:
        self._opened = OpenedSecrets(ring, capacity)
        self._material = OpenedSecrets(ring, capacity)
        self._capacity = capacity
        self._fallbacks: OrderedDict[tuple[bytes, bytes], ssl.SSLContext] = OrderedDict()

    def of(self, claimed: ClaimedDelivery) -> list[ssl.SSLContext]:
        """The contexts to connect with: the current material's, then -- while replaced
        material is a fallback, and its client certificate another -- the replaced client
        certificate with the *current* CA bundle (a CA dropped is dropped at once); empty for
        an endpoint without TLS material."""
        purpose = endpoint_purpose(claimed.endpoint_id, "tls")
        try:
            if not claimed.sealed_tls:
                return []
            current = self._opened.open_parsed(claimed.sealed_tls[0], purpose, _context)
            if len(claimed.sealed_tls) == 1:
                return [current]
            fallback = self._fallback(claimed.sealed_tls[1], claimed.sealed_tls[0], purpose)
            return [current] if fallback is None else [current, fallback]
        except SealedValueError as exc:
            raise RequestNotBuilt(f"the TLS material: {exc}") from None
        except (ssl.SSLError, ValueError):
            # Checked when saved; a row written otherwise. Never the material in the message.
            raise RequestNotBuilt("the TLS material: OpenSSL refused it (set tls again)") from None

    def _fallback(self, previous: bytes, current: bytes, purpose: str) -> ssl.SSLContext | None:
        entry = (bytes(previous), bytes(current))
        found = self._fallbacks.get(entry)
        if found is not None:
            self._fallbacks.move_to_end(entry)
            return found
        was = certificates.ClientTLS.load(dict(self._material.open_json(previous, purpose)))
        now = certificates.ClientTLS.load(dict(self._material.open_json(current, purpose)))
        if was.client_certificate is None or was.client_certificate == now.client_certificate:
            return None  # nothing else to present
        made = certificates.context(
            certificates.ClientTLS(was.client_certificate, was.client_key, now.ca_bundle)
        )
        self._fallbacks[entry] = made
        if len(self._fallbacks) > self._capacity:
            self._fallbacks.popitem(last=False)
        return made
