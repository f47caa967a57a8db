"""Endpoint transformations: a CEL program over an event -- ``type`` and ``payload``, as a
filter sees them -- that makes the request an endpoint is sent, for example

    {"body": {"text": "Order " + payload.id + " paid: " + string(payload.amount)}}

It gives a map of at most these keys, each optional:

- ``body``: any JSON value, sent as the request's body (``application/json``) in place of the
  endpoint's own (the payload, or its envelope);
- ``headers``: a map of names to values, sent besides the endpoint's static headers, under the
  same rules (Herald's own headers are Herald's);
- ``path``: added to the path of the endpoint's URL (``/channels/ops``): the scheme, the host
  and the URL's own path stay, so the request goes nowhere its URL does not already allow;
- ``query``: a map of names to values, added to the URL's query;
- ``skip``: true, and nothing is sent: the delivery ends, recorded as skipped.

A transformation is compiled, type-checked and bounded when saved exactly as a filter is
(cel_programs.py): the same environment, the same cost walk, the same budget. Before each run
its bound is worked out on the event at hand; one that could exceed its budget is not run, and
the delivery is not sent. What it gives is the same for the same event and program -- CEL has
no clock, no randomness and no I/O, and the body is written with its keys sorted -- so every
attempt of a delivery, which keeps the program its endpoint had when it was accepted, sends
the same bytes.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit, urlunsplit

import cel_expr_python.cel as cel

from app.core.caches import SharedCache
from app.core.metrics import PROGRAM_BUDGET_EXCEEDED
from app.programs.budget import FILTERS_PER_TENANT, STEPS_PER_EVALUATION, STEPS_PER_EVENT
from app.programs.cel_programs import (
    ENVIRONMENT,
    Program,
    ProgramError,
    bound_on,
    compile_program,
    runtime_error,
)
from app.programs.filter_cost import CONVERT_BYTE, ROOT, FilterCost

# What a transformation's value costs to become a body, per byte of its bound: read back out of
# CEL's runtime and written as JSON with its keys sorted (bench/programs.py measures it).
WRITE_BYTE = 64
# Parsing the stored payload, per byte, for a transformation that reads it (a filter's event
# is parsed by the request that brings it): json.loads at its slowest, a payload of `[],`s.
PARSE_BYTE = 80
# Longer than a filter: a chat message's blocks are spelt out in it.
MAX_LENGTH = 4000
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


class TransformationError(ProgramError):
    """Why a transformation cannot be saved, in words."""


class TransformationFailed(Exception):
    """Why a transformation made no request of this event, in words (never a value of it)."""


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


# A process's compiled transformations, each tenant with a share (app/core/caches.py), as
# filters: compiling one costs milliseconds, and no tenant's may push out another's.
_COMPILED: SharedCache[tuple[str, str], Program | TransformationError] = SharedCache(
    per_tenant=FILTERS_PER_TENANT, total=50_000
)


def compiled(source: str) -> Program:
    """The transformation compiled; TransformationError if it is not one Herald runs. Its cost
    includes writing what it gives as JSON (``WRITE_BYTE`` a byte of its bound on that)."""
    return compile_program(
        source,
        noun="transformation",
        max_length=MAX_LENGTH,
        returns=_a_map,
        error=TransformationError,
        charged=_written,
    )


def _written(cost: FilterCost) -> FilterCost:
    return dataclasses.replace(cost, steps=cost.steps + cost.size.times(WRITE_BYTE))


def _a_map(returns: Any) -> str | None:
    if returns == cel.Type.DYN or returns.name().lower().startswith("map"):
        return None
    return (
        "a transformation gives a map -- body, headers, path, query, skip -- and this one "
        f"gives {returns.name().lower()}"
    )


def cached(tenant_id: str, source: str) -> Program:
    program = _COMPILED.get((tenant_id, source))
    if program is None:
        try:
            program = compiled(source)
        except TransformationError as exc:  # saved under older rules: kept refused
            program = exc
        _COMPILED.put(tenant_id, (tenant_id, source), program)
    if isinstance(program, TransformationError):
        raise program
    return program


def request_of(
    tenant_id: str,
    source: str,
    event_type: str,
    payload: bytes,
    *,
    max_body_bytes: int,
    header_fault: Callable[[dict[str, str]], str | None],
) -> Transformed:
    """What the tenant's transformation ``source`` makes of this event, its headers held to
    ``header_fault`` (the static headers' rules); TransformationFailed, in words, when it
    makes no request -- the worker, a trial and a delivery's page all ask this."""
    try:
        program = cached(tenant_id, source)
    except TransformationError as exc:  # saved under older rules
        raise TransformationFailed(f"the transformation cannot run: {exc}") from None
    made = run(program, event_type, payload, max_body_bytes=max_body_bytes)
    if made.headers and (fault := header_fault(made.headers)) is not None:
        raise TransformationFailed(f"the headers it made: {fault}")
    return made


def run(program: Program, event_type: str, payload: bytes, *, max_body_bytes: int) -> Transformed:
    """What ``program`` makes of this event; TransformationFailed, in words, when it makes no
    request: it could go over its budget (it is then not run), it fails on this event (a
    missing field), or what it gives is not a request."""
    reads = program.cost.reads_payload
    # Read into CEL only when the program reads it, and charged before it is parsed.
    conversion = (CONVERT_BYTE + PARSE_BYTE) * len(payload) if reads else 0
    if conversion > STEPS_PER_EVENT:
        PROGRAM_BUDGET_EXCEEDED.labels(program="transformation").inc()
        raise TransformationFailed(
            f"the transformation was not run: reading this event's {len(payload):,}-byte "
            f"payload could take {conversion:,} steps, over the {STEPS_PER_EVENT:,} a delivery's "
            "may (a transformation that reads the payload runs on payloads up to "
            f"{STEPS_PER_EVENT // (CONVERT_BYTE + PARSE_BYTE):,} bytes)"
        )
    decoded = json.loads(payload) if reads else {}
    bound = bound_on(program.cost, decoded, len(payload))
    if bound > STEPS_PER_EVALUATION or bound + conversion > STEPS_PER_EVENT:
        PROGRAM_BUDGET_EXCEEDED.labels(program="transformation").inc()
        spent = "its" if bound > STEPS_PER_EVALUATION else "a delivery's"
        most = STEPS_PER_EVALUATION if bound > STEPS_PER_EVALUATION else STEPS_PER_EVENT
        raise TransformationFailed(
            f"the transformation was not run: it could take {bound + conversion:,} steps on "
            f"this event's {len(payload):,}-byte payload, over {spent} budget of {most:,}"
        )
    activation = ENVIRONMENT.Activation({f"{ROOT}.payload": decoded, f"{ROOT}.type": event_type})
    try:
        value = program.expression.eval(activation)
    except RuntimeError as exc:  # the runtime's own cap on a loop's turns, or a value it refused
        if "budget" in str(exc):
            PROGRAM_BUDGET_EXCEEDED.labels(program="transformation").inc()
        raise TransformationFailed(
            f"the transformation was stopped: {runtime_error(str(exc))}"
        ) from None
    if value.type() == cel.Type.ERROR:
        raise TransformationFailed(
            f"the transformation failed on this event: {runtime_error(value.value())}"
        )
    made = _request(value.plain_value(), max_body_bytes)
    return Transformed(made.skip, made.body, made.headers, made.path, made.query, bound)


def _request(value: Any, max_body_bytes: int) -> Transformed:
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
