"""How long a payload is kept: the number every event and delivery carries (``payload_days``),
and when that makes it gone. What decides the number is the SQL function payload_days_of
(migration 0049); what drops the payloads is retention (app/operations/)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

# payload_days of a payload kept as long as the records of its deliveries (no setting of its
# tenant's says less): the day's last payload class, which goes with its day.
KEPT_WITH_RECORDS = 32767


def payload_expiry(created_at: datetime, payload_days: int) -> datetime | None:
    """When a payload accepted at ``created_at`` and kept ``payload_days`` is gone (None: it
    goes with its records)."""
    if payload_days >= KEPT_WITH_RECORDS:
        return None
    return created_at + timedelta(days=payload_days)


def expired(expires_at: datetime | None, now: datetime | None = None) -> bool:
    """Whether a payload that goes at ``expires_at`` (None: with its records) is gone by
    ``now``: from that moment it is neither shown nor sent again, whether or not retention
    has dropped it yet."""
    return expires_at is not None and expires_at <= (now or datetime.now(UTC))
