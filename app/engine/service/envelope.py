"""What one attempt sends: the body in its endpoint's payload format, and the headers -- the
endpoint's static ones, then Herald's own and the signature over exactly those body bytes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.core.sealing import OpenedSecrets, SealedValueError, endpoint_purpose
from app.endpoints.service import endpoints, signing_keys
from app.engine.repository.delivery_leases import ClaimedDelivery
from app.engine.service import cloudevents
from app.engine.service.signing import signed_headers


class RequestNotBuilt(Exception):
    """The endpoint's row holds what no HTTP request can carry: a row saved before the rules
    held the whole string, or written by hand. Says what, naming a header but never its value
    (it may be a credential)."""


def request_body(claimed: ClaimedDelivery) -> bytes:
    """``raw`` and ``cloudevents-binary``: the payload as accepted. ``standard``: the Standard
    Webhooks envelope around it, ``{"type", "timestamp", "data"}``; ``cloudevents``: the
    CloudEvent around it (cloudevents.py) -- built around the stored bytes, not re-encoded, so
    the data is the payload byte for byte, and every attempt sends the same body. A body its
    endpoint's transformation made (transforming.py) replaces all of these."""
    if claimed.transformed is not None and claimed.transformed.body is not None:
        return claimed.transformed.body
    if claimed.payload_format == "cloudevents":
        return cloudevents.structured_body(claimed)
    if claimed.payload_format != "standard":
        return claimed.payload
    at = claimed.event_at.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    return b"".join(
        (
            b'{"type":',
            json.dumps(claimed.event_type).encode(),
            b',"timestamp":',
            json.dumps(at).encode(),
            b',"data":',
            claimed.payload,
            b"}",
        )
    )


def request_headers(
    claimed: ClaimedDelivery,
    body: bytes,
    trace: dict[str, str],
    opened: OpenedSecrets,
    *,
    user_agent: str,
) -> dict[str, str]:
    """The endpoint's static headers (plain and secret, opened from ``opened``'s cache), the
    trace context (``traceparent``), then Herald's own: a static header can never replace
    those (they are refused at save too). Static headers are held to the save rule's syntax
    here as well: aiohttp would refuse a line break only while writing the request, past the
    point where the attempt counts as sent."""
    static = {**claimed.headers, **_secret_headers(claimed, opened)}
    fault = endpoints.header_fault(static)
    if fault is not None:
        raise RequestNotBuilt(f"{fault} (correct the endpoint's headers, then redrive)")
    secrets, keys = _signing(claimed, opened)
    content_type = "application/json"
    if claimed.payload_format == "cloudevents":
        content_type = cloudevents.STRUCTURED_CONTENT_TYPE
    binary = claimed.payload_format == "cloudevents-binary"
    sent = {
        **static,
        **trace,
        **event_headers(claimed),
        **stream_headers(claimed),
        **({ORIGIN_HEADER: claimed.webhook_origin} if claimed.webhook_origin else {}),
        **(cloudevents.binary_headers(claimed) if binary else {}),
        **signed_headers(
            claimed.id,
            body,
            secrets,
            keys=keys,
            content_type=content_type,
            user_agent=user_agent,
        ),
    }
    return {**_made_headers(claimed, sent), **sent}


def _made_headers(claimed: ClaimedDelivery, sent: Mapping[str, str]) -> dict[str, str]:
    """A transformation's headers (transforming.py), but none that names a header already sent,
    in any case: the endpoint's static ones, which the tenant may hold as credentials, and
    Herald's own are never replaced nor doubled by them."""
    if claimed.transformed is None:
        return {}
    taken = {name.lower() for name in sent}
    return {k: v for k, v in claimed.transformed.headers.items() if k.lower() not in taken}


def _signing(
    claimed: ClaimedDelivery, opened: OpenedSecrets
) -> tuple[list[str], list[Ed25519PrivateKey]]:
    """The secrets (v1) and the private keys (v1a) the endpoint signs with, each opened once
    per process; a rotated-out one is among them until its overlap ends."""
    schemes = claimed.signature_schemes
    try:
        secrets = []
        if "v1" in schemes:
            purpose = endpoint_purpose(claimed.endpoint_id, "signing")
            secrets = opened.open_all(claimed.sealed_secrets, purpose)
        keys: list[Ed25519PrivateKey] = []
        if "v1a" in schemes:
            purpose = endpoint_purpose(claimed.endpoint_id, "ed25519")
            keys = [
                opened.open_parsed(sealed, purpose, signing_keys.private_key)
                for sealed in claimed.sealed_keys
            ]
    except SealedValueError as exc:
        raise RequestNotBuilt(f"the signing secret: {exc}") from None
    except signing_keys.BadSigningKey as exc:
        raise RequestNotBuilt(str(exc)) from None
    if not secrets and not keys:
        raise RequestNotBuilt("the endpoint has no key to sign v1a with: rotate its signing key")
    return secrets, keys


def _secret_headers(claimed: ClaimedDelivery, opened: OpenedSecrets) -> Mapping[str, str]:
    if claimed.sealed_headers is None:
        return {}
    purpose = endpoint_purpose(claimed.endpoint_id, "headers")
    try:
        return opened.open_json(claimed.sealed_headers, purpose)
    except SealedValueError as exc:
        raise RequestNotBuilt(f"the secret headers: {exc}") from None


# The CloudEvents webhook handshake's origin, which a consenting receiver expects on every
# delivery (HTTP 1.1 Web Hooks for Event Delivery, 4.1.2).
ORIGIN_HEADER = "WebHook-Request-Origin"

# What the event is, on every delivery whatever its format: a raw body carries neither, and an
# event fanned out to several endpoints reaches each with a delivery id of its own (webhook-id)
# -- this one names the event they share.
EVENT_TYPE_HEADER = "Herald-Event-Type"
EVENT_ID_HEADER = "Herald-Event-Id"


def event_headers(claimed: ClaimedDelivery) -> dict[str, str]:
    return {EVENT_TYPE_HEADER: claimed.event_type, EVENT_ID_HEADER: claimed.event_id}


# An ordered delivery's place in its stream (docs/decisions.md, on ordered delivery): what lets a
# receiver check the order and drop a late duplicate.
SEQUENCE_HEADER = "Herald-Stream-Sequence"
ORDERING_KEY_HEADER = "Herald-Ordering-Key"


def stream_headers(claimed: ClaimedDelivery) -> dict[str, str]:
    if claimed.stream_seq is None:
        return {}
    headers = {SEQUENCE_HEADER: str(claimed.stream_seq)}
    if claimed.stream:  # a keyed stream (not the endpoint's one, nor its keyless one)
        headers[ORDERING_KEY_HEADER] = claimed.stream
    return headers
