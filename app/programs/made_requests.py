"""What a transformation's value must be to be a request (transformations.py runs it): a map
of at most ``body``, ``headers``, ``path``, ``query`` and ``skip``, each held to the rules that
keep every attempt's bytes the same and the request where its URL points."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit, urlunsplit

MAX_PATH = 1024
MAX_QUERY = 20
MAX_QUERY_TEXT = 1000
KEYS = ("body", "headers", "path", "query", "skip")
# Sent by Herald on every attempt (app/core/tracing.py), as its own headers are.
_TRACE_CONTEXT = ("traceparent", "tracestate")
# What a path may hold: RFC 3986's path characters, percent-escapes included. Never a query, a
# fragment or an empty segment; and, read as a server reads it -- escapes decoded, a segment's
# ;parameters dropped -- never a dot segment or an escaped slash, which could climb out of the
# URL's path (`%2e%2e`, `..;`, `%2f`).
_PATH = re.compile(r"(/[A-Za-z0-9\-._~!$&'()*+,;=:@%]+)+/?")


class TransformationFailed(Exception):
    """Why a transformation made no request of this event, in words. The words may name a
    field or a value of the event (``no field x``): they are its tenant's to read, in the
    delivery's reason, and never logged."""


@dataclass(frozen=True)
class Transformed:
    """What a transformation made of one event."""

    skip: bool = False
    body: bytes | None = None  # JSON; None: the endpoint's own body
    headers: dict[str, str] = field(default_factory=dict)
    path: str = ""  # added to the URL's path
    query: tuple[tuple[str, str], ...] = ()  # added to the URL's query, in name order
    bound: int = 0  # the steps it could take on this event, its payload made CEL's included

    def url_for(self, url: str) -> str:
        """The endpoint's URL with this path added to its own and these query parameters
        after its own: the scheme, the host and the port stay the URL's."""
        if not self.path and not self.query:
            return url
        parts = urlsplit(url)
        path = parts.path.rstrip("/") + self.path if self.path else parts.path
        query = "&".join(q for q in (parts.query, urlencode(self.query)) if q)
        return urlunsplit((parts.scheme, parts.netloc, path, query, parts.fragment))


def request_from(value: Any, max_body_bytes: int) -> Transformed:
    """The request ``value`` stands for; TransformationFailed, in words, when it stands for none."""
    if not isinstance(value, dict):
        raise TransformationFailed(
            "a transformation gives a map -- body, headers, path, query, skip -- and this one "
            f"gave {_kind(value)}"
        )
    unknown = sorted(str(key) for key in value if key not in KEYS)
    if unknown:
        raise TransformationFailed(
            f"a transformation gives body, headers, path, query and skip; not {unknown[0]}"
        )
    skip = value.get("skip", False)
    if not isinstance(skip, bool):
        raise TransformationFailed(f"skip must be true or false, not {_kind(skip)}")
    if skip:
        return Transformed(skip=True)
    body = None
    if "body" in value:
        body = _written_body(value["body"])
        if len(body) > max_body_bytes:
            raise TransformationFailed(
                f"the body it made is {len(body):,} bytes, over the {max_body_bytes:,} a "
                "payload may have"
            )
    headers = _texts(value.get("headers", {}), "headers", MAX_QUERY)
    if traced := sorted(name for name in headers if name.lower() in _TRACE_CONTEXT):
        raise TransformationFailed(f"the header {traced[0]} is Herald's: the trace context")
    query = _texts(value.get("query", {}), "query", MAX_QUERY)
    if any(len(k) + len(v) > MAX_QUERY_TEXT for k, v in query.items()):
        raise TransformationFailed(f"a query parameter may hold at most {MAX_QUERY_TEXT} bytes")
    return Transformed(
        body=body,
        headers=headers,
        path=_path(value.get("path", "")),
        query=tuple(sorted(query.items())),
    )


def _written_body(value: Any) -> bytes:
    """The body as JSON, its keys sorted: the same bytes for the same value, whatever order the
    runtime's map gives them in. A timestamp is written in RFC 3339; bytes, a duration, a
    number JSON has none for, or a map whose keys are not all text are refused in words."""
    if _has_other_keys(value):
        raise TransformationFailed("a map in the body has a key that is not text")
    try:
        return json.dumps(
            value,
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
            default=_timestamp,
        ).encode()
    except _NotJson as exc:
        raise TransformationFailed(f"the body holds {exc}, which JSON cannot") from None
    except ValueError:  # NaN or an infinity
        raise TransformationFailed(
            "the body holds a number JSON cannot (NaN or infinity)"
        ) from None


def _has_other_keys(value: Any) -> bool:
    """Whether a map in ``value`` has a key that is not text: Python takes true and 1 for one
    key, so which of them a body kept would hang on the runtime's map order. (Every value is
    stacked, scalars too: cheaper than asking each whether it holds more.)"""
    waiting = [value]
    take, add = waiting.pop, waiting.extend
    while waiting:
        item = take()
        kind = type(item)
        if kind is dict:
            if any(type(key) is not str for key in item):
                return True
            add(item.values())
        elif kind is list:
            add(item)
    return False


class _NotJson(Exception):
    pass


def _timestamp(value: Any) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    raise _NotJson(_kind(value))


def _texts(value: Any, name: str, most: int) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise TransformationFailed(f"{name} must be a map of text to text")
    if len(value) > most:
        raise TransformationFailed(f"{name} may hold at most {most} entries")
    return dict(sorted(value.items()))  # in name order: the runtime's map order is its own


def _path(value: Any) -> str:
    if not isinstance(value, str):
        raise TransformationFailed(f"path must be text, not {_kind(value)}")
    if not value:
        return ""
    if len(value) > MAX_PATH or not _PATH.fullmatch(value) or _climbs(value):
        raise TransformationFailed(
            f"path must start with /, hold at most {MAX_PATH} of the characters a URL's path "
            "may, and no . or .. segment nor escaped slash, however written"
        )
    return value


def _climbs(path: str) -> bool:
    decoded = unquote(path)
    if decoded.count("/") != path.count("/") or "\\" in decoded:
        return True  # an escaped slash or backslash: a segment boundary some servers honour
    return any(segment.split(";")[0] in (".", "..") for segment in decoded.split("/"))


def _kind(value: Any) -> str:
    kinds = {bool: "a boolean", int: "a number", float: "a number", str: "text"}
    if value is None:
        return "null"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a map"
    if isinstance(value, bytes | bytearray):
        return "bytes"
    if isinstance(value, timedelta):
        return "a duration"
    return kinds.get(type(value), type(value).__name__)
