"""For receivers: check that a webhook came from Herald, with the endpoint's signing secret."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from herald_client.errors import InvalidSignature


def verify(headers: Mapping[str, str], body: bytes | str, secret: str) -> Any:
    """The webhook's JSON body, once its Standard Webhooks signature (``webhook-id``,
    ``webhook-timestamp``, ``webhook-signature``) matches ``body`` -- the bytes as received,
    before any parsing -- and its timestamp is within five minutes. During a secret rotation
    Herald signs with both secrets; either one verifies. Raises InvalidSignature otherwise."""
    wanted = {name.lower(): value for name, value in headers.items()}
    try:
        return Webhook(secret).verify(body, wanted)
    except WebhookVerificationError as exc:
        raise InvalidSignature(str(exc)) from None
