"""The portal's words for a delivery's state and an attempt's outcome: a customer reads
"Will be retried", not the API's `enqueued` (the API and the console keep their terms)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_STATES = {
    "pending": "Waiting to be sent",
    "enqueued": "Will be retried",
    "leased": "Being sent",
    "succeeded": "Delivered",
    "dead": "Failed",
    "cancelled": "Cancelled",
}

_OUTCOMES = {
    "success": "Delivered",
    "retryable": "Failed, retried later",
    "unknown": "No answer in time, retried later",
    "permanent": "Refused, not retried",
    "blocked": "Address not allowed",
}


# A test's steps, as the customer's page names them. The operator's route (its egress proxy)
# and the checks that did not apply are Herald's business, not the customer's: left out
# unless one failed.
_STEPS = {
    "destination": "Address",
    "proxy": "Route",
    "tls": "Client certificate",
    "oauth2": "OAuth2 token",
    "signature": "Signature",
    "request": "Request",
}
_SAID_WHEN_OK = {"destination": "your URL resolves to an address Herald may send to"}


def said_step(step: str) -> str:
    return _STEPS.get(step, step)


def shown_steps(steps: list[Any]) -> list[tuple[str, str, str]]:
    """(name, outcome, what happened) of the steps a customer reads."""
    shown = []
    for s in steps:
        if s.outcome != "failed" and (s.outcome == "skipped" or s.step == "proxy"):
            continue
        detail = _SAID_WHEN_OK.get(s.step, s.detail) if s.outcome == "ok" else s.detail
        shown.append((said_step(s.step), s.outcome, detail))
    return shown


# Why a delivery failed, by the reason's first word (the API's `dead_reason`); what follows the
# colon -- a status, what the address was -- is kept as the detail.
_REASONS = {
    "permanent_failure": "Your receiver refused it, and the same request would be refused again",
    "max_attempts_exhausted": "Every attempt failed",
    "destination_blocked": "Its address is one Herald may not send to",
    "endpoint_disabled": "The endpoint was disabled",
    "endpoint_deleted": "The endpoint was deleted",
}


def said_reason(reason: str) -> str:
    """``permanent_failure: HTTP 400`` as "Your receiver refused it, ... (HTTP 400)"."""
    head, _, detail = reason.partition(":")
    head, _, count = head.partition(" (")
    said = _REASONS.get(head.strip())
    if said is None:
        return reason
    if head.strip() == "max_attempts_exhausted" and count:
        said += f" ({count.rstrip(')')} attempts)"
    return f"{said} ({detail.strip()})" if detail.strip() else said


def said_state(state: str) -> str:
    return _STATES.get(state, state)


def said_outcome(outcome: str) -> str:
    return _OUTCOMES.get(outcome, outcome)


WORDS: dict[str, Callable[..., Any]] = {
    "said_state": said_state,
    "said_outcome": said_outcome,
    "said_reason": said_reason,
    "shown_steps": shown_steps,
}
