"""Delivery states and attempt outcome classes (see design.md, "States")."""

from __future__ import annotations

from enum import StrEnum


class DeliveryState(StrEnum):
    PENDING = "pending"  # accepted and not yet published, or a lease given back
    ENQUEUED = "enqueued"  # a wake-up of its destination covers it
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


DELIVERY_STATES = tuple(s.value for s in DeliveryState)
TERMINAL_STATES = (
    DeliveryState.SUCCEEDED.value,
    DeliveryState.DEAD.value,
    DeliveryState.CANCELLED.value,
)
OUTCOMES = tuple(o.value for o in Outcome)
