"""Time-ordered, prefixed identifiers (``dlv_01JD...``): a ULID body after a type prefix.

Sorting ids sorts by creation time, which is what keyset pagination and operators expect; the
prefix says what an id names when it shows up in a log line or a support ticket.
"""

from __future__ import annotations

import os
import re
import threading
import time
from datetime import UTC, datetime

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Two digits per lookup. An id's 26 digits (130 bits) split evenly: 10 digits are the 2 zero
# bits and the 48 of the millisecond, 16 the 80 random bits.
_PAIRS = [high + low for high in _CROCKFORD for low in _CROCKFORD]
_TIME_SHIFTS = range(40, -1, -10)
_RANDOM_SHIFTS = range(70, -1, -10)
_lock = threading.Lock()
_last_ms = 0
_last_random = 0
_last_time_digits = ""

# What each prefix names, in the words an error message uses.
KINDS = {
    "ten": "tenant",
    "key": "API key",
    "ep": "endpoint",
    "evt": "event",
    "dlv": "delivery",
    "run": "reconcile run",
    "rdv": "redrive job",
    "ses": "console session",
    "pts": "portal session",
    "aud": "audit record",
    "test": "test event",  # POST /v1/endpoints/{id}/test: its webhook-id; nothing is stored
}
PREFIXES = tuple(KINDS)
_BODY = "[0-9A-HJKMNP-TV-Z]{26}"
ID_REGEX = r"^(?:" + "|".join(PREFIXES) + r")_" + _BODY + "$"
ID_PATTERN = re.compile(ID_REGEX)


def _digits(value: int, shifts: range) -> str:
    return "".join([_PAIRS[(value >> shift) & 1023] for shift in shifts])


def new_id(prefix: str) -> str:
    """A ULID: 48 bits of milliseconds then 80 random bits, monotonic within one process.

    Accept makes two per intent, so the millisecond's digits are made once per millisecond."""
    global _last_ms, _last_random, _last_time_digits
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        if now_ms <= _last_ms:
            # Same millisecond (or a clock step back): keep order by incrementing the random part.
            _last_random = (_last_random + 1) & ((1 << 80) - 1)
        else:
            _last_ms = now_ms
            _last_time_digits = _digits(now_ms, _TIME_SHIFTS)
            _last_random = int.from_bytes(os.urandom(10), "big")
        return f"{prefix}_{_last_time_digits}{_digits(_last_random, _RANDOM_SHIFTS)}"


def sibling_id(prefix: str, of: str) -> str:
    """A new id that carries ``of``'s millisecond: an event's deliveries are its siblings, so
    that they fall in the same day's partitions as their event and are found from the event's
    id by a primary-key range (``sibling_range``) rather than an index of their own."""
    global _last_random
    time_digits = of[of.index("_") + 1 :][:10]
    with _lock:
        _last_random = (_last_random + 1) & ((1 << 80) - 1)
        return f"{prefix}_{time_digits}{_digits(_last_random, _RANDOM_SHIFTS)}"


def sibling_range(prefix: str, of: str) -> tuple[str, str]:
    """The least and the greatest id of this kind that can be a sibling of ``of``."""
    time_digits = of[of.index("_") + 1 :][:10]
    return f"{prefix}_{time_digits}{'0' * 16}", f"{prefix}_{time_digits}{'Z' * 16}"


def id_floor(prefix: str, moment: datetime) -> str:
    """The smallest id of this kind created at ``moment``: every id made earlier sorts below
    it, so "created before" is a primary-key range, no extra index needed."""
    ms = int(moment.timestamp() * 1000)
    return f"{prefix}_{_digits(ms, _TIME_SHIFTS)}{'0' * 16}"


def moment_of(value: str) -> datetime:
    """When an id was minted (to the millisecond): its first 10 digits."""
    ms = 0
    for digit in value[value.index("_") + 1 :][:10]:
        ms = ms * 32 + _CROCKFORD.index(digit)
    return datetime.fromtimestamp(ms / 1000, UTC)


def is_id(value: str) -> bool:
    """Whether ``value`` could be a Herald id at all; anything else is looked up as nothing
    (and never reaches SQL, where a NUL byte would be an error rather than "not found")."""
    return ID_PATTERN.fullmatch(value) is not None  # whole: `$` alone lets a final "\n" by


def looks_like(prefix: str, value: str) -> bool:
    """Whether ``value`` could be a Herald id of this kind: the one id rule that every id input
    (path, query, body, filter, cursor) is held to before it goes anywhere near SQL."""
    return value.startswith(prefix + "_") and ID_PATTERN.fullmatch(value) is not None


def id_regex(prefix: str) -> str:
    """The rule of ``looks_like`` as a regular expression, for the OpenAPI document."""
    return f"^{prefix}_{_BODY}$"


def describe_id(prefix: str) -> str:
    """An id of this kind in words, for error messages: "an endpoint id (ep_ followed by ...)"."""
    kind = KINDS[prefix]
    article = "an" if kind[0] in "aeiouAEIOU" else "a"
    return f"{article} {kind} id ({prefix}_ followed by 26 capital letters and digits)"
