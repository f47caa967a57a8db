"""Endpoint filters: Common Expression Language over an event -- ``type`` (its event type) and
``payload`` (the payload as accepted) -- for example
``payload.amount > 100 && payload.currency == "EUR"``.

A filter is compiled and type-checked when the endpoint is saved (a 422 says where it is wrong
or why it costs too much), cached compiled, and evaluated at fan-out. What it builds is built
then: its ``matches`` patterns are compiled once (patterns.py) and its calls to CEL's own
``matches``, which would compile the pattern again on every call, are rewritten to search with
them. Its cost is bounded from
the checked AST (filter_cost.py) and worked out for each event before it runs (``Events``): one
that could exceed its budget on this event is not run -- the endpoint is passed by, with the
reason, and ``herald_program_budget_exceeded_total{program="filter"}`` counts it. The runtime's
own cap on a loop's turns (10,000 an evaluation) stands behind the bound.
"""

from __future__ import annotations

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
from app.programs.filter_cost import CONVERT_BYTE, ROOT

MAX_LENGTH = 1000


class FilterError(ProgramError):
    """Why a filter cannot be saved, in words (it names the position of a syntax error)."""


Filter = Program


# A process's compiled filters, each tenant with a share (app/core/caches.py): compiling one costs
# 1-8 ms (the checker, the cost walk, the runtime's plan), so one tenant's many filters must
# never push out another's. A tenant has at most FILTERS_PER_TENANT distinct filters (the
# endpoints service refuses more), so its share holds all of them.
_COMPILED: SharedCache[tuple[str, str], Filter | FilterError] = SharedCache(
    per_tenant=FILTERS_PER_TENANT, total=50_000
)


def cached(tenant_id: str, source: str) -> Filter:
    """The tenant's filter compiled, once per process while it stays in the tenant's share."""
    program = _COMPILED.get((tenant_id, source))
    if program is None:
        try:
            program = compiled(source)
        except FilterError as exc:  # saved under older rules: kept refused, not recompiled
            program = exc
        _COMPILED.put(tenant_id, (tenant_id, source), program)
    if isinstance(program, FilterError):
        raise program
    return program


def compiled(source: str) -> Filter:
    """The filter compiled; FilterError if it is not a filter Herald runs."""
    return compile_program(
        source, noun="filter", max_length=MAX_LENGTH, returns=_boolean, error=FilterError
    )


def _boolean(returns: Any) -> str | None:
    if returns in (cel.Type.BOOL, cel.Type.DYN):
        return None
    return f"a filter must be true or false; this one gives {returns.name().lower()}"


class Events:
    """One event's filters: its payload made visible to CEL once, and what its filters may
    still spend (``STEPS_PER_EVENT`` for all of them together)."""

    def __init__(
        self, event_type: str, payload: dict[str, Any], payload_bytes: int, *, tenant_id: str
    ) -> None:
        self._tenant_id = tenant_id
        self._payload = payload
        self._payload_bytes = payload_bytes
        self._activation = ENVIRONMENT.Activation(
            {f"{ROOT}.payload": payload, f"{ROOT}.type": event_type}
        )
        self._left = STEPS_PER_EVENT
        # Paid by the first filter that reads the payload, from the event's budget.
        self._conversion = CONVERT_BYTE * payload_bytes

    def matches(self, source: str) -> tuple[bool, str | None]:
        """Whether the event passes the filter; when it does not, why, in words. A filter that
        fails on this event (a missing field, a type mismatch), gives anything but a boolean or
        would go over its budget lets nothing through: an endpoint gets only what its filter
        says yes to."""
        try:
            program = cached(self._tenant_id, source)
        except FilterError as exc:  # saved under older rules
            return False, f"the filter cannot run: {exc}"
        bound = self.bound(program)
        conversion = self._conversion if program.cost.reads_payload else 0
        if bound > STEPS_PER_EVALUATION or bound + conversion > self._left:
            PROGRAM_BUDGET_EXCEEDED.labels(program="filter").inc()
            if bound <= STEPS_PER_EVALUATION and conversion > STEPS_PER_EVENT:
                return False, (
                    f"the filter was not run: making this event's {self._payload_bytes:,}-byte "
                    f"payload readable to CEL could take {conversion:,} steps, over the "
                    "event's budget"
                )
            spent = "its" if bound > STEPS_PER_EVALUATION else "this event's filters'"
            return False, (
                f"the filter was not run: it could take {bound:,} steps on this event, over "
                f"{spent} budget"
            )
        self._left -= bound + conversion
        if conversion:
            self._conversion = 0  # made once; the activation keeps it
        try:
            verdict = program.expression.eval(self._activation)
        except RuntimeError as exc:  # the runtime's own cap on a loop's turns
            PROGRAM_BUDGET_EXCEEDED.labels(program="filter").inc()
            return False, f"the filter was stopped: {runtime_error(str(exc))}"
        if verdict.type() == cel.Type.ERROR:
            return False, f"the filter failed on this event: {runtime_error(verdict.value())}"
        value = verdict.value()
        if value is True:
            return True, None
        if value is False:
            return False, "the filter said false"
        return False, f"the filter gave {verdict.type().name().lower()}, not true or false"

    def bound(self, program: Filter) -> int:
        """The program's bound on this event, in steps (cel_programs.bound_on)."""
        return bound_on(program.cost, self._payload, self._payload_bytes)
