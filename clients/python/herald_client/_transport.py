"""Running a call: authentication, the idempotency key, retries as Herald asks for them."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import httpx

from herald_client._calls import Call
from herald_client.errors import HeraldError
from herald_client.models import Problem

T = TypeVar("T")
# Herald says "not now, nothing was done" with these: 429 (rate) and 503 (its database or queue
# is unavailable, or a transaction conflict), each with Retry-After.
RETRYABLE_STATUSES = frozenset({429, 503})


def headers_for(call: Call[Any], api_key: str, key: str | None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {api_key}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return headers


def key_for(call: Call[Any]) -> str | None:
    """One key per call, the same on each of its retries: Herald then answers a retry of a
    request it already accepted with that acceptance, never a second delivery."""
    if not call.keyed:
        return None
    return call.idempotency_key or f"hc-{uuid.uuid4().hex}"


def next_wait(
    call: Call[Any], response: httpx.Response | None, attempt: int, most: int, most_wait: float
) -> float | None:
    """How long to wait before trying ``call`` again, or None not to.

    429 and 503 are Herald's "nothing was done, try again": any call is tried again, after what
    Retry-After says -- never sooner; if that is longer than ``most_wait``, the error is the
    answer. A lost connection (``response`` None) may have hidden a call that was done: only a
    repeatable call is tried again."""
    if attempt >= most:
        return None
    if response is None:
        return _backoff(attempt, most_wait) if call.repeatable else None
    if response.status_code not in RETRYABLE_STATUSES:
        return None
    asked = _retry_after(response)
    if asked is None:
        return _backoff(attempt, most_wait)
    return asked if asked <= most_wait else None


def _retry_after(response: httpx.Response) -> float | None:
    """Retry-After in seconds (given as seconds or as an HTTP date), None when absent."""
    said = response.headers.get("Retry-After")
    if said is None:
        return None
    try:
        seconds = float(said)
    except ValueError:
        try:
            seconds = (parsedate_to_datetime(said) - datetime.now(UTC)).total_seconds()
        except (TypeError, ValueError):
            return None
    return max(seconds, 0.0)


def _backoff(attempt: int, most_wait: float) -> float:
    backoff: float = 0.5 * 2.0**attempt
    return min(most_wait, backoff) * random.uniform(0.5, 1.0)  # noqa: S311


def answer(call: Call[T], response: httpx.Response) -> T:
    if response.status_code >= 400:
        try:
            problem = Problem.model_validate(response.json())
        except ValueError:
            problem = Problem(status=response.status_code, title=response.reason_phrase)
        raise HeraldError(response.status_code, problem)
    return call.read(response.json() if response.content else None)
