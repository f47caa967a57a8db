"""The worker's TLS contexts for endpoints with TLS material (mutual TLS, a CA of their own):
made once per process per sealed value, as secrets are opened once (app/sealing.py) -- a
replacement writes new sealed bytes, so nothing here is ever stale."""

from __future__ import annotations

import json
import ssl

from app import certificates
from app.engine.repository.delivery_leases import ClaimedDelivery
from app.engine.service.envelope import RequestNotBuilt
from app.sealing import KeyRing, OpenedSecrets, SealedValueError, endpoint_purpose

# An SSLContext holds its trust store: a few hundred KiB with the system's. Endpoints with TLS
# material are few; the least recently used context goes first beyond this.
CONTEXTS_KEPT = 256


def _context(opened: str) -> ssl.SSLContext:
    return certificates.context(certificates.ClientTLS.load(json.loads(opened)))


class ClientContexts:
    def __init__(self, ring: KeyRing, capacity: int = CONTEXTS_KEPT) -> None:
        self._opened = OpenedSecrets(ring, capacity)

    def of(self, claimed: ClaimedDelivery) -> list[ssl.SSLContext]:
        """The contexts to connect with: the current material's, then the fallback's while it
        is one; empty for an endpoint without TLS material."""
        purpose = endpoint_purpose(claimed.endpoint_id, "tls")
        try:
            return [
                self._opened.open_parsed(sealed, purpose, _context) for sealed in claimed.sealed_tls
            ]
        except SealedValueError as exc:
            raise RequestNotBuilt(f"the TLS material: {exc}") from None
        except (ssl.SSLError, ValueError):
            # Checked when saved; a row written otherwise. Never the material in the message.
            raise RequestNotBuilt("the TLS material: OpenSSL refused it (set tls again)") from None
