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
from collections.abc import Callable
from typing import Any

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
from app.programs.made_requests import TransformationFailed as TransformationFailed
from app.programs.made_requests import Transformed as Transformed
from app.programs.made_requests import request_from

# What a transformation's value costs to become a body, per byte of its bound: read back out of
# CEL's runtime and written as JSON with its keys sorted (bench/programs.py measures it).
WRITE_BYTE = 64
# Parsing the stored payload, per byte, for a transformation that reads it (a filter's event
# is parsed by the request that brings it): json.loads at its slowest, a payload of `[],`s.
PARSE_BYTE = 80
# Longer than a filter: a chat message's blocks are spelt out in it.
MAX_LENGTH = 4000


class TransformationError(ProgramError):
    """Why a transformation cannot be saved, in words."""


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
    made = request_from(value.plain_value(), max_body_bytes)
    return Transformed(made.skip, made.body, made.headers, made.path, made.query, bound)
