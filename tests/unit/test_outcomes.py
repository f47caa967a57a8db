"""Pure attempt decisions: outcome classes, Retry-After, backoff, transitions, signatures."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone
from email.utils import format_datetime

import pytest
from standardwebhooks.webhooks import Webhook

from app.core.states import DeliveryState, Outcome
from app.engine.service.outcomes import (
    Transition,
    backoff_seconds,
    classify_status,
    decide,
    parse_retry_after,
)
from app.engine.service.signing import signed_headers

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, Outcome.SUCCESS),
        (201, Outcome.SUCCESS),
        (204, Outcome.SUCCESS),
        (299, Outcome.SUCCESS),
        (301, Outcome.PERMANENT),
        (302, Outcome.PERMANENT),
        (307, Outcome.PERMANENT),
        (400, Outcome.PERMANENT),
        (401, Outcome.RETRYABLE),
        (403, Outcome.RETRYABLE),
        (404, Outcome.RETRYABLE),
        (405, Outcome.PERMANENT),
        (408, Outcome.RETRYABLE),
        (410, Outcome.PERMANENT),
        (413, Outcome.PERMANENT),
        (422, Outcome.PERMANENT),
        (425, Outcome.RETRYABLE),
        (429, Outcome.RETRYABLE),
        (500, Outcome.RETRYABLE),
        (502, Outcome.RETRYABLE),
        (503, Outcome.RETRYABLE),
        (599, Outcome.RETRYABLE),
    ],
)
def test_status_classes(status: int, outcome: Outcome) -> None:
    assert classify_status(status) is outcome


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("2", 2.0),
        ("0", 0.0),
        (" 120 ", 120.0),
        ("999999", 86400.0),  # clamped
        (format_datetime(NOW + timedelta(seconds=90), usegmt=True), 90.0),
        ("Sun, 29 Nov 2026 12:00:30 GMT", 30.0),
        (None, None),
        ("", None),
        ("soon", None),
        ("-5", None),
        ("1.5", None),
        ("Sun, 29 Nov 2026 11:00:00 GMT", None),  # in the past
        ("Mon, 99 Foo 2026 99:99:99 GMT", None),
        # Hostile headers must not crash the attempt's record.
        ("1" + "0" * 400, 86400.0),
        ("9" * 5000, 86400.0),
        ("\u00b2", None),  # superscript two: isdigit() but not a number
        ("\u0663", None),  # Arabic-Indic three
        ("Sun, 29 Nov 99999 12:00:30 GMT", None),
        ("Sun, 29 Nov 2026 12:00:30 +9999", None),
    ],
)
def test_retry_after(header: str | None, expected: float | None) -> None:
    assert parse_retry_after(header, NOW, maximum=86400) == expected


def test_backoff_follows_the_schedule_within_jitter() -> None:
    schedule = (5.0, 300.0, 1800.0)
    rng = random.Random(7)  # noqa: S311  (jitter, not cryptography)
    for attempt, base in [(1, 5.0), (2, 300.0), (3, 1800.0), (4, 1800.0), (9, 1800.0)]:
        delays = [backoff_seconds(attempt, schedule, rng) for _ in range(200)]
        assert all(base * 0.8 <= d <= base * 1.2 for d in delays)
        assert max(delays) - min(delays) > base * 0.2  # really jittered


def _decide(
    outcome: Outcome, status: int | None, attempts_used: int, error: str | None = None
) -> Transition:
    return decide(
        outcome=outcome,
        status_code=status,
        attempts_used=attempts_used,
        max_attempts=3,
        schedule=(1.0, 2.0),
        retry_after=None,
        error=error,
    )


def test_decide_transitions() -> None:
    assert _decide(Outcome.SUCCESS, 200, 1).state is DeliveryState.SUCCEEDED

    retry = _decide(Outcome.RETRYABLE, 503, 1)
    assert retry.state is DeliveryState.PENDING and 0.8 <= (retry.delay_seconds or 0) <= 1.2
    assert _decide(Outcome.UNKNOWN, None, 2).state is DeliveryState.PENDING

    exhausted = _decide(Outcome.RETRYABLE, 500, 3)
    assert exhausted.state is DeliveryState.DEAD
    assert exhausted.dead_reason == "max_attempts_exhausted (3)"

    gone = _decide(Outcome.PERMANENT, 410, 1)
    assert gone.state is DeliveryState.DEAD and gone.disable_endpoint
    bad = _decide(Outcome.PERMANENT, 400, 1)
    assert bad.state is DeliveryState.DEAD and not bad.disable_endpoint

    blocked = _decide(Outcome.BLOCKED, None, 1, error="10.0.0.1")
    assert blocked.state is DeliveryState.DEAD
    assert (blocked.dead_reason or "").startswith("destination_blocked")


def test_a_request_never_built_is_dead_at_once_and_the_reason_says_why() -> None:
    why = "request not built: the value of the header X-A must be printable ASCII"
    unbuilt = _decide(Outcome.PERMANENT, None, 1, error=why)
    assert unbuilt.state is DeliveryState.DEAD and not unbuilt.disable_endpoint
    assert unbuilt.dead_reason == f"permanent_failure: {why}"
    answered = _decide(Outcome.PERMANENT, 400, 1, error="x")
    assert answered.dead_reason == "permanent_failure: HTTP 400"


def test_retry_after_is_a_floor_not_a_ceiling() -> None:
    sooner = decide(
        outcome=Outcome.RETRYABLE,
        status_code=429,
        attempts_used=1,
        max_attempts=5,
        schedule=(100.0,),
        retry_after=2.0,
    )
    later = decide(
        outcome=Outcome.RETRYABLE,
        status_code=429,
        attempts_used=1,
        max_attempts=5,
        schedule=(0.1,),
        retry_after=2.0,
    )
    assert (sooner.delay_seconds or 0) >= 80  # the schedule's longer wait stands
    assert later.delay_seconds == 2.0


def test_signature_verifies_with_each_secret_during_rotation() -> None:
    old, new = "whsec_" + "A" * 43 + "=", "whsec_" + "B" * 43 + "="
    body = b'{"order":42}'
    headers = signed_headers("dlv_1", body, [new, old])
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert Webhook(new).verify(body, headers) == {"order": 42}
    assert Webhook(old).verify(body, headers) == {"order": 42}


def test_signature_timestamp_is_utc_even_for_a_local_clock() -> None:
    local = datetime.now(UTC).astimezone(timezone(timedelta(hours=5)))
    secret = "whsec_" + "C" * 43 + "="
    headers = signed_headers("dlv_2", b"{}", [secret], now=local)
    assert int(headers["webhook-timestamp"]) == int(local.timestamp())
    Webhook(secret).verify(b"{}", headers)
