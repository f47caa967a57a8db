"""What one attempt sends: the body in its endpoint's payload format, and the headers -- the
endpoint's static ones, then Herald's own and the signature over exactly those body bytes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC

from app.endpoints.service import endpoints
from app.engine.repository.delivery_leases import ClaimedDelivery
from app.engine.service.signing import signed_headers
from app.sealing import OpenedSecrets, SealedValueError, endpoint_purpose


class RequestNotBuilt(Exception):
    """The endpoint's row holds what no HTTP request can carry: a row saved before the rules
    held the whole string, or written by hand. Says what, naming a header but never its value
    (it may be a credential)."""


def request_body(claimed: ClaimedDelivery) -> bytes:
    """``raw``: the payload as accepted. ``standard``: the Standard Webhooks envelope around it,
    ``{"type", "timestamp", "data"}`` -- built around the stored bytes, not re-encoded, so the
    data is the payload byte for byte, and every attempt sends the same body."""
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
    claimed: ClaimedDelivery, body: bytes, trace: dict[str, str], opened: OpenedSecrets
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
    purpose = endpoint_purpose(claimed.endpoint_id, "signing")
    try:
        secrets = opened.open_all(claimed.sealed_secrets, purpose)
    except SealedValueError as exc:
        raise RequestNotBuilt(f"the signing secret: {exc}") from None
    return {
        **static,
        **trace,
        **stream_headers(claimed),
        **signed_headers(claimed.id, body, secrets),
    }


def _secret_headers(claimed: ClaimedDelivery, opened: OpenedSecrets) -> Mapping[str, str]:
    if claimed.sealed_headers is None:
        return {}
    purpose = endpoint_purpose(claimed.endpoint_id, "headers")
    try:
        return opened.open_json(claimed.sealed_headers, purpose)
    except SealedValueError as exc:
        raise RequestNotBuilt(f"the secret headers: {exc}") from None


# An ordered delivery's place in its stream (docs/decisions.md, "Issue 27"): what lets a
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
