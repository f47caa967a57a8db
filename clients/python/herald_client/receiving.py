"""For receivers: check that a webhook came from Herald, with the endpoint's signing secret
(``whsec_``, v1 signatures) or its public key (``whpk_``, v1a)."""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature as BadEd25519Signature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from herald_client.errors import InvalidSignature

TOLERANCE_SECONDS = 5 * 60


def verify(headers: Mapping[str, str], body: bytes | str, secret: str) -> Any:
    """The webhook's JSON body, once its Standard Webhooks signature (``webhook-id``,
    ``webhook-timestamp``, ``webhook-signature``) matches ``body`` -- the bytes as received,
    before any parsing -- and its timestamp is within five minutes. ``secret`` is the
    endpoint's signing secret (``whsec_...``: a v1 signature must match) or its public key
    (``whpk_...``: a v1a one must). During a rotation Herald signs with both the old and the
    new; either one verifies. Raises InvalidSignature otherwise."""
    wanted = {name.lower(): value for name, value in headers.items()}
    if secret.startswith("whpk_"):
        return _verify_v1a(wanted, body.encode() if isinstance(body, str) else body, secret)
    try:
        return Webhook(secret).verify(body, wanted)
    except WebhookVerificationError as exc:
        raise InvalidSignature(str(exc)) from None


def _verify_v1a(headers: Mapping[str, str], body: bytes, public_key: str) -> Any:
    try:
        key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key[5:]))
        msg_id, timestamp = headers["webhook-id"], int(headers["webhook-timestamp"])
        signatures = headers["webhook-signature"].split(" ")
    except (KeyError, ValueError, binascii.Error) as exc:
        raise InvalidSignature(f"missing or malformed webhook headers or key: {exc}") from None
    if abs(time.time() - timestamp) > TOLERANCE_SECONDS:
        raise InvalidSignature("the message timestamp is too old or too new")
    content = f"{msg_id}.{timestamp}.".encode() + body
    for signature in signatures:
        scheme, _, value = signature.partition(",")
        if scheme != "v1a":
            continue
        try:
            key.verify(base64.b64decode(value), content)
        except (BadEd25519Signature, binascii.Error, ValueError):
            continue
        return json.loads(body)
    raise InvalidSignature("no v1a signature matches the public key")
