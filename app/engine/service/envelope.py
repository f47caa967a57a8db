"""What one attempt sends: the body in its endpoint's payload format, and the headers -- the
endpoint's static ones, then Herald's own and the signature over exactly those body bytes."""

from __future__ import annotations

import json
from datetime import UTC

from app.endpoints.service import endpoints
from app.engine.repository.delivery_leases import ClaimedDelivery
from app.engine.service.signing import signed_headers


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


def request_headers(claimed: ClaimedDelivery, body: bytes, trace: dict[str, str]) -> dict[str, str]:
    """The endpoint's static headers, the trace context (``traceparent``), then Herald's own:
    a static header can never replace those (they are refused at save too). Static headers are
    held to the save rule's syntax here as well: aiohttp would refuse a line break only while
    writing the request, past the point where the attempt counts as sent."""
    fault = endpoints.header_fault(claimed.headers)
    if fault is not None:
        raise RequestNotBuilt(f"{fault} (correct the endpoint's headers, then redrive)")
    return {
        **claimed.headers,
        **trace,
        **stream_headers(claimed),
        **signed_headers(claimed.id, body, claimed.secrets),
    }


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
