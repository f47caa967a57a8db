"""An attempt as a CloudEvent 1.0 over the HTTP protocol binding: structured mode (the event,
data included, as one ``application/cloudevents+json`` body) or binary mode (the payload as
the body, the attributes in ``ce-*`` headers).

The attributes: ``id`` the event's id (the same for every endpoint and every attempt, so
``source`` + ``id`` deduplicates across endpoints too), ``source`` the tenant's own (``PATCH
/v1/tenant``) or ``urn:herald:tenant:<id>`` (the tenant whose event it is), ``type`` the event
type, ``time`` when it was accepted, and ``datacontenttype`` ``application/json``. Built around
the payload's stored bytes, never re-encoded: every attempt sends, and signs, the same body."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import quote

from app.engine.repository.delivery_leases import ClaimedDelivery

SPEC_VERSION = "1.0"
STRUCTURED_CONTENT_TYPE = "application/cloudevents+json; charset=utf-8"
DATA_CONTENT_TYPE = "application/json"
# The binding's header encoding (3.1.3.2): printable ASCII stays, but for space, '"' and '%'.
_HEADER_SAFE = "".join(c for c in map(chr, range(0x21, 0x7F)) if c not in ' "%')


def source(tenant_id: str) -> str:
    return f"urn:herald:tenant:{tenant_id}"


def _time(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _attributes(claimed: ClaimedDelivery) -> dict[str, str]:
    return {
        "specversion": SPEC_VERSION,
        "id": claimed.event_id,
        "source": claimed.cloudevents_source or source(claimed.tenant_id),
        "type": claimed.event_type,
        "time": _time(claimed.event_at),
    }


def structured_body(claimed: ClaimedDelivery) -> bytes:
    head = json.dumps({**_attributes(claimed), "datacontenttype": DATA_CONTENT_TYPE})
    return b"".join((head[:-1].encode(), b',"data":', claimed.payload, b"}"))


def binary_headers(claimed: ClaimedDelivery) -> dict[str, str]:
    return {
        f"ce-{name}": quote(value, safe=_HEADER_SAFE)
        for name, value in _attributes(claimed).items()
    }
