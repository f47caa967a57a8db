"""Delivery states and attempt outcome classes (see design.md, "States")."""

from __future__ import annotations

from enum import StrEnum


class DeliveryState(StrEnum):
    # Waiting for its next attempt: accepted or redriven and not yet tried, or a lease given
    # back. Whether its destination's wake-up has reached Redis is the outbox's to say.
    PENDING = "pending"
    ENQUEUED = "enqueued"  # waiting for a retry its last attempt's record scheduled
    LEASED = "leased"  # a worker holds it until lease_until
    SUCCEEDED = "succeeded"
    DEAD = "dead"  # exhausted, permanent failure or endpoint gone; only redrive revives it
    # Stopped by its producer: never sent again, final. An attempt in flight at that moment
    # finishes and is recorded (it keeps the lease token for that), and nothing follows it.
    CANCELLED = "cancelled"


class Outcome(StrEnum):
    SUCCESS = "success"
    RETRYABLE = "retryable"
    UNKNOWN = "unknown"  # the request went out; the receiver may have acted
    PERMANENT = "permanent"
    BLOCKED = "blocked"  # refused by the SSRF guard; nothing was connected
    # The endpoint's OAuth2 token endpoint gave no token; nothing was sent to the receiver.
    AUTH_FAILED = "auth_failed"


# A `cancelled` delivery's last_error when its producer did not cancel it: its endpoint's
# transformation said not to send it (app/engine/service/transforming.py). No attempt was made.
SKIPPED_BY_TRANSFORMATION = "skipped_by_transformation"

DELIVERY_STATES = tuple(s.value for s in DeliveryState)
TERMINAL_STATES = (
    DeliveryState.SUCCEEDED.value,
    DeliveryState.DEAD.value,
    DeliveryState.CANCELLED.value,
)
OUTCOMES = tuple(o.value for o in Outcome)
