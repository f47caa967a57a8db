"""Standard Webhooks signatures (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from standardwebhooks.webhooks import Webhook

from app import __version__

USER_AGENT = f"Herald/{__version__}"


def signed_headers(
    delivery_id: str, body: bytes, secrets: Sequence[str], now: datetime | None = None
) -> dict[str, str]:
    """Headers for one attempt. The timestamp is per attempt; the id is the delivery's, so a
    receiver deduplicates retries by ``webhook-id`` (or ``Idempotency-Key``, the same value).

    Every secret signs (space-separated), so a receiver verifies with either during rotation.
    """
    # standardwebhooks reads a datetime's wall clock as UTC whatever its tzinfo: pass UTC only.
    timestamp = (now or datetime.now(UTC)).astimezone(UTC)
    text = body.decode()
    signature = " ".join(Webhook(secret).sign(delivery_id, timestamp, text) for secret in secrets)
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Idempotency-Key": delivery_id,
        "webhook-id": delivery_id,
        "webhook-timestamp": str(int(timestamp.timestamp())),
        "webhook-signature": signature,
    }
