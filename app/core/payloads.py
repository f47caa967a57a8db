"""A payload as every attempt will send it: compact JSON, encoded once, within its limits --
the accept's rule, and a trial's (a transformation tried on a payload given). Pure: no I/O."""

from __future__ import annotations

import json
import math
from typing import Any

from app.core.errors import PayloadTooLarge, Unprocessable
from app.core.fields import MAX_PAYLOAD_DEPTH


def encode_payload(payload: dict[str, Any], limit: int) -> bytes:
    """The bytes every attempt will send: compact JSON, encoded once, never re-serialised.

    Every accept path comes through here, so this is where a payload's limits are enforced:
    its depth (before anything walks it recursively) and its size."""
    if _nests_deeper_than(payload, MAX_PAYLOAD_DEPTH):
        raise Unprocessable(
            f"payload nests too deeply: objects and arrays may nest at most {MAX_PAYLOAD_DEPTH} "
            "levels (the payload itself is level 1)"
        )
    try:
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        encoded = body.encode()
    except UnicodeEncodeError:
        raise Unprocessable(
            "payload contains an unpaired UTF-16 surrogate (\\ud800-\\udfff)"
        ) from None
    except ValueError:
        raise Unprocessable(_not_finite(payload)) from None
    if len(encoded) > limit:
        raise PayloadTooLarge(f"payload is {len(encoded)} bytes; the limit is {limit}")
    return encoded


def _not_finite(payload: dict[str, Any]) -> str:
    """Where the payload holds a number JSON cannot carry. Python's JSON reader takes a number
    past a double's range (1e999) as infinity, and NaN and Infinity as themselves; none of
    them can be sent on as JSON."""
    level: list[tuple[str, Any]] = [("payload", payload)]
    while level:
        below: list[tuple[str, Any]] = []
        for path, value in level:
            if isinstance(value, float) and not math.isfinite(value):
                return (
                    f"{path} is not a number JSON can carry: beyond a double's range "
                    "(about 1.8e308), or NaN or Infinity"
                )
            if isinstance(value, dict):
                below += [(f"{path}.{key}", child) for key, child in value.items()]
            elif isinstance(value, list):
                below += [(f"{path}[{i}]", child) for i, child in enumerate(value)]
        level = below
    return "payload holds a number JSON cannot carry: NaN, Infinity or beyond a double's range"


def _nests_deeper_than(payload: dict[str, Any], limit: int) -> bool:
    """Level by level, not recursively: recursion is what a deep payload breaks (pydantic's
    serialiser gives up near 255 levels, the JSON encoder near 1000)."""
    level: list[dict[str, Any] | list[Any]] = [payload]
    for _ in range(limit):
        below = [
            child
            for container in level
            for child in (container.values() if isinstance(container, dict) else container)
            if isinstance(child, dict | list)
        ]
        if not below:
            return False
        level = below
    return True
