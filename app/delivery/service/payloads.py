"""The fingerprint that makes two requests with one idempotency key the same request, and the
payload's encoding every accept path shares (app/core/payloads.py). Pure: no I/O."""

from __future__ import annotations

import hashlib
import json

from app.core.payloads import encode_payload as encode_payload
from app.delivery.schemas import DeliveryIntent, EventIntent


def request_fingerprint(route: str, intent: DeliveryIntent | EventIntent, payload: bytes) -> bytes:
    """What makes two requests with one idempotency key the same request: the route, the
    intent's fields, and the payload as encoded -- the bytes already made, never a second
    serialisation of the payload."""
    # A batch item's own key is not part of what it asks for: it replays the single route.
    asked = intent.model_dump(mode="json", exclude={"payload", "idempotency_key"})
    if asked.get("customer_id", "") is None:
        # Fields added later count only when given: a key's retry from before they existed
        # is still the same request.
        del asked["customer_id"]
    fields = json.dumps(
        asked,
        sort_keys=True,
        separators=(",", ":"),
    )
    # Neither line can hold a newline (JSON escapes it), so the parts cannot run together.
    return hashlib.sha256(f"{route}\n{fields}\n".encode() + payload).digest()
