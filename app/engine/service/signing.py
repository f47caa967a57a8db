"""Standard Webhooks signatures (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``):
the symmetric ``v1`` (HMAC-SHA256, by the standardwebhooks library) and the asymmetric ``v1a``
(ed25519 over the same content, by pyca ``cryptography``; the library has no v1a)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from datetime import UTC, datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from standardwebhooks.webhooks import Webhook

from app.core.config import DEFAULT_USER_AGENT


def signed_headers(
    delivery_id: str,
    body: bytes,
    secrets: Sequence[str],
    now: datetime | None = None,
    keys: Sequence[Ed25519PrivateKey] = (),
    content_type: str = "application/json",
    user_agent: str = DEFAULT_USER_AGENT,
) -> dict[str, str]:
    """Headers for one attempt. The timestamp is per attempt; the id is the delivery's, so a
    receiver deduplicates retries by ``webhook-id`` (or ``Idempotency-Key``, the same value).

    Every secret and every key signs (space-separated), so a receiver verifies with either
    during a rotation, and with whichever scheme it holds a key for.
    """
    # standardwebhooks reads a datetime's wall clock as UTC whatever its tzinfo: pass UTC only.
    timestamp = (now or datetime.now(UTC)).astimezone(UTC)
    text = body.decode()
    signatures = [Webhook(secret).sign(delivery_id, timestamp, text) for secret in secrets]
    if keys:
        # The spec's signed content, `{msg_id}.{timestamp}.{payload}`, as v1 signs it.
        content = f"{delivery_id}.{int(timestamp.timestamp())}.".encode() + body
        signatures += [f"v1a,{base64.b64encode(key.sign(content)).decode()}" for key in keys]
    return {
        "Content-Type": content_type,
        "User-Agent": user_agent,
        "Idempotency-Key": delivery_id,
        "webhook-id": delivery_id,
        "webhook-timestamp": str(int(timestamp.timestamp())),
        "webhook-signature": " ".join(signatures),
    }
