"""Herald's error hierarchy: each error a status, a title and a slug, and the RFC 9457 problem
object it becomes. Raised by services and routes alike; rendered as an HTTP answer in one place,
app/api/problems.py -- nothing here knows HTTP."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

PROBLEM_BASE = "https://herald.dev/problems/"


class Problem(BaseModel):
    """RFC 9457 problem details, as every error response is shaped."""

    type: str
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
    errors: list[dict[str, Any]] | None = None


class HeraldError(Exception):
    status: ClassVar[int] = 500
    title: ClassVar[str] = "Internal error"
    slug: ClassVar[str] = "internal"

    def __init__(self, detail: str | None = None, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail or self.title)
        self.detail = detail
        self.headers = headers or {}


class BadRequest(HeraldError):
    status, title, slug = 400, "Bad request", "bad-request"


class Unauthorized(HeraldError):
    status, title, slug = 401, "Unauthorized", "unauthorized"

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(detail, headers={"WWW-Authenticate": "Bearer"})


class Forbidden(HeraldError):
    status, title, slug = 403, "Forbidden", "forbidden"


class NotFound(HeraldError):
    status, title, slug = 404, "Not found", "not-found"


class Conflict(HeraldError):
    status, title, slug = 409, "Conflict", "conflict"


class PayloadTooLarge(HeraldError):
    status, title, slug = 413, "Payload too large", "payload-too-large"


class UnsupportedMediaType(HeraldError):
    status, title, slug = 415, "Unsupported media type", "unsupported-media-type"


class Unprocessable(HeraldError):
    status, title, slug = 422, "Unprocessable content", "unprocessable"


class IdempotencyMismatch(Unprocessable):
    title, slug = "Idempotency key reused with a different request", "idempotency-mismatch"


class DestinationRefused(Unprocessable):
    title, slug = "Destination refused", "destination-refused"


class TooManyRequests(HeraldError):
    status, title, slug = 429, "Too many requests", "too-many-requests"


class ServiceUnavailable(HeraldError):
    status, title, slug = 503, "Service unavailable", "unavailable"


def problem_body(error: HeraldError) -> dict[str, Any]:
    """An error as a problem object, for places that report it inside a larger answer."""
    problem = Problem(
        type=PROBLEM_BASE + error.slug, title=error.title, status=error.status, detail=error.detail
    )
    return problem.model_dump(exclude_none=True)
