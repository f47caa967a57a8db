"""The portal's words for a delivery's state and an attempt's outcome: a customer reads
"Will be retried", not the API's `enqueued` (the API and the console keep their terms)."""

from __future__ import annotations

from collections.abc import Callable

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


def said_state(state: str) -> str:
    return _STATES.get(state, state)


def said_outcome(outcome: str) -> str:
    return _OUTCOMES.get(outcome, outcome)


WORDS: dict[str, Callable[[str], str]] = {"said_state": said_state, "said_outcome": said_outcome}
