"""When the client tries a call again (clients/python/herald_client/_transport.py): after 429
and 503 -- Herald did nothing -- any call, never sooner than Retry-After; after a lost
connection only a call that may be repeated."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest
from herald_client import _calls
from herald_client._transport import next_wait

KEYED = _calls.create_delivery("ep_x", "a", {}, deliver_after=None, idempotency_key=None)
ONCE = _calls.create_endpoint({"url": "http://x"})


def answer(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers)


def test_retry_after_is_waited_for_exactly_and_never_cut_short() -> None:
    assert next_wait(KEYED, answer(503, **{"Retry-After": "5"}), 0, 4, 60.0) == 5.0
    # Asked for longer than the client will wait: the 503 is the answer, not an early retry.
    assert next_wait(KEYED, answer(429, **{"Retry-After": "120"}), 0, 4, 60.0) is None
    at = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    waited = next_wait(KEYED, answer(503, **{"Retry-After": at}), 0, 4, 60.0)
    assert waited is not None and 25 <= waited <= 30


def test_without_retry_after_the_wait_backs_off_within_the_cap() -> None:
    waits = [next_wait(KEYED, answer(503), attempt, 10, 4.0) for attempt in range(8)]
    assert all(w is not None and 0 < w <= 4.0 for w in waits)


def test_a_call_that_must_not_be_repeated_is_retried_only_when_herald_did_nothing() -> None:
    assert next_wait(ONCE, answer(503, **{"Retry-After": "1"}), 0, 4, 60.0) == 1.0
    assert next_wait(ONCE, None, 0, 4, 60.0) is None  # a lost connection: it may have been done
    assert next_wait(KEYED, None, 0, 4, 60.0) is not None


@pytest.mark.parametrize("status", [200, 202, 400, 404, 409, 422, 500])
def test_other_answers_are_final(status: int) -> None:
    assert next_wait(KEYED, answer(status, **{"Retry-After": "1"}), 0, 4, 60.0) is None


def test_retries_stop_at_the_most() -> None:
    assert next_wait(KEYED, answer(503, **{"Retry-After": "1"}), 4, 4, 60.0) is None
