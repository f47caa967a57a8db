"""An endpoint's health, and why a delivery failed, in a customer's words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from app.api.formatting import when
from app.delivery.service.endpoint_stats import WindowCounts
from app.models import Endpoint
from app.portal.routes.words import said_reason
from app.portal.service.health import judged

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
QUIET = WindowCounts(0, 0, None)


def endpoint(**columns: Any) -> Endpoint:
    healthy = {
        "enabled": True,
        "disabled_reason": None,
        "paused_until": None,
        "breaker_trips": 0,
        "consecutive_failures": 0,
        "failing_since": None,
        "last_success_at": None,
    }
    return Endpoint(**{**healthy, **columns})


def test_each_state_is_one_word_and_a_sentence_that_says_since_when() -> None:
    cases = [
        (endpoint(), ("No deliveries yet", "off", None)),
        (
            endpoint(last_success_at=NOW - timedelta(minutes=5)),
            ("Healthy", "ok", "last delivered 2026-12-07 11:55:00 UTC"),
        ),
        (
            endpoint(consecutive_failures=3, failing_since=NOW - timedelta(hours=1)),
            (
                "Failing",
                "bad",
                "the last 3 attempts failed since 2026-12-07 11:00:00 UTC; retried on schedule",
            ),
        ),
        (
            endpoint(
                consecutive_failures=10, breaker_trips=1, paused_until=NOW + timedelta(minutes=1)
            ),
            (
                "Paused",
                "warn",
                "10 failed attempts in a row: Herald waits until 2026-12-07 12:01:00 UTC, then "
                "tries one delivery before the rest",
            ),
        ),
        (
            endpoint(paused_until=NOW + timedelta(seconds=30)),
            (
                "Paused",
                "warn",
                "your receiver asked Herald to wait (Retry-After) until 2026-12-07 12:00:30 UTC",
            ),
        ),
        (
            endpoint(enabled=False, disabled_reason="receiver answered 410 Gone"),
            ("Disabled", "off", "receiver answered 410 Gone"),
        ),
    ]
    for row, expected in cases:
        health = judged(row, QUIET, when, NOW)
        assert (health.summary, health.tone, health.detail) == expected


def test_a_pause_that_has_ended_is_no_pause() -> None:
    ended = endpoint(paused_until=NOW - timedelta(seconds=1), last_success_at=NOW)
    assert judged(ended, QUIET, when, NOW).summary == "Healthy"


def test_the_last_hour_is_counted_when_there_were_attempts() -> None:
    busy = WindowCounts(attempts=12, successes=11, p95_ms=40)
    assert judged(endpoint(), busy, when, NOW).last_hour == (
        "11 of 12 attempts delivered in the last hour"
    )
    assert judged(endpoint(), QUIET, when, NOW).last_hour is None


def test_why_a_delivery_failed_is_said_in_words_keeping_its_detail() -> None:
    said = {
        "permanent_failure: HTTP 400": (
            "Your receiver refused it, and the same request would be refused again (HTTP 400)"
        ),
        "max_attempts_exhausted (10)": "Every attempt failed (10 attempts)",
        "destination_blocked: 10.0.0.7 is a private address": (
            "Its address is one Herald may not send to (10.0.0.7 is a private address)"
        ),
        "endpoint_disabled": "The endpoint was disabled",
        "something new": "something new",  # a reason not known here is shown as it is
    }
    for reason, words in said.items():
        assert said_reason(reason) == words
