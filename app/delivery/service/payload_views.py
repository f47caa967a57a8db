"""How a delivery's payload reads on a page -- the console's, the portal's: pretty-printed when
the page holds all of it, its start as sent when it is too large to show whole."""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from datetime import datetime

from app.delivery.service.event_detail import PayloadHead

# A delivery page shows at most this much of a payload (and reads no more of it from the
# database): enough for any ordinary event, while a payload at the 256 KiB default limit -- or
# a larger configured one -- does not make every view of the page, live every 3 s, that big.
PREVIEW_BYTES = 16 * 1024


@dataclass(frozen=True)
class PayloadView:
    text: str  # escaped by the template, like everything a page shows
    size: int  # the payload's bytes in all
    whole: bool  # False: ``text`` is only its start, and the page offers the rest
    pretty: bool  # re-indented JSON (False: as it was sent)
    expired_at: datetime | None = None  # set: it is gone, by its tenant's payload retention


def payload_view(sent: PayloadHead) -> PayloadView:
    """What a page shows of a payload given its first bytes and its size."""
    head, size = sent.head, sent.size
    if sent.expired_at is not None:
        return PayloadView("", 0, whole=True, pretty=False, expired_at=sent.expired_at)
    if len(head) < size:
        # Cut by bytes: a character split at the end is left out rather than shown broken.
        start = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(head)
        return PayloadView(start, size, whole=False, pretty=False)
    text = head.decode("utf-8", errors="replace")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return PayloadView(text, size, whole=True, pretty=False)
    # The stored bytes are Python's own json.dumps of the accepted value (intake.encode_payload),
    # so parsing and dumping them again changes no key, number or string: only the layout.
    pretty = json.dumps(value, indent=2, ensure_ascii=False)
    return PayloadView(pretty, size, whole=True, pretty=True)
