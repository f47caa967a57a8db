"""The one place that renders RFC 9457 problem details: Herald's errors (app/core/errors.py),
FastAPI's validation and HTTP errors, database trouble and anything unexpected, each answered as
``application/problem+json``; and the OpenAPI ``responses`` that document them on every route."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import structlog
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.core.db import DATABASE_TROUBLE, DRIVER_OUTAGES, is_transaction_conflict
from app.core.errors import PROBLEM_BASE, BadRequest, HeraldError, Problem, Unprocessable
from app.core.fields import MAX_PAYLOAD_DEPTH
from app.core.json_errors import is_number_too_long, malformed_json, number_too_long

PROBLEM_JSON = "application/problem+json"
# How long a client should wait before retrying while the database is unreachable.
DATABASE_RETRY_AFTER_SECONDS = 5
# ...and after its transaction lost a deadlock or a serialization conflict: at once, nearly.
CONFLICT_RETRY_AFTER_SECONDS = 1

log = structlog.get_logger("herald.api")


def problem_response(
    request: Request,
    *,
    status: int,
    title: str,
    slug: str,
    detail: str | None = None,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    problem = Problem(
        type=PROBLEM_BASE + slug,
        title=title,
        status=status,
        detail=detail,
        # Percent-encoded as a URI reference is: a path may hold anything, NUL included.
        instance=quote(request.url.path),
        errors=errors,
    )
    return JSONResponse(
        problem.model_dump(exclude_none=True),
        status_code=status,
        media_type=PROBLEM_JSON,
        headers=headers,
    )


async def herald_problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HeraldError)
    return problem_response(
        request,
        status=exc.status,
        title=exc.title,
        slug=exc.slug,
        detail=exc.detail,
        headers=exc.headers,
    )


def _malformed_json(exc: RequestValidationError) -> str | None:
    """FastAPI reports a JSON syntax error as "JSON decode error" at a character offset; say
    what is wrong, and where as a person counts: line and column."""
    for error in exc.errors():
        position = error.get("loc", ())[-1:]
        if error.get("type") == "json_invalid" and isinstance(exc.body, str) and position:
            complaint = error.get("ctx", {}).get("error", "malformed JSON")
            return malformed_json(complaint, exc.body, int(position[0]))
    return None


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    if (malformed := _malformed_json(exc)) is not None:
        return problem_response(
            request, status=422, title="Malformed JSON", slug="malformed-json", detail=malformed
        )
    # Never echo the offending input back: it may be a payload or a secret.
    errors = [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
        for e in exc.errors()
    ]
    return problem_response(
        request,
        status=422,
        title="Request validation failed",
        slug="validation",
        detail="; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors),
        errors=jsonable_encoder(errors),
    )


def _unreadable_body(exc: StarletteHTTPException) -> HeraldError | None:
    """FastAPI answers any body it fails to decode with 400 "There was an error parsing the
    body"; for the failures a client can fix, say what to fix."""
    if isinstance(exc.__cause__, RecursionError):  # the JSON decoder recursed too deep
        return Unprocessable(
            "the body nests too deeply to read: objects and arrays in a payload may nest at "
            f"most {MAX_PAYLOAD_DEPTH} levels (the payload itself is level 1)"
        )
    if isinstance(exc.__cause__, UnicodeDecodeError):
        return BadRequest("the body is not valid UTF-8; send JSON encoded as UTF-8")
    if is_number_too_long(exc.__cause__):  # valid JSON, but more than Python converts
        return Unprocessable(number_too_long())
    return None


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if (unreadable := _unreadable_body(exc)) is not None:
        return await herald_problem(request, unreadable)
    slug = {404: "not-found", 405: "method-not-allowed"}.get(exc.status_code, "http")
    return problem_response(
        request,
        status=exc.status_code,
        title=str(exc.detail),
        slug=slug,
        headers=dict(exc.headers or {}),
    )


def _is_database_unavailable(exc: BaseException) -> bool:
    if isinstance(exc, PoolTimeoutError | OperationalError | InterfaceError):
        return True
    if isinstance(exc, DRIVER_OUTAGES):
        return True
    if isinstance(exc, DBAPIError):
        return exc.connection_invalidated
    # asyncpg raises OSError subclasses (ConnectionRefusedError, ...) when it cannot connect.
    return isinstance(exc, OSError)


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    """Database trouble is the client's cue to retry, not a bug: 503 with ``Retry-After``.

    So is a transaction PostgreSQL rolled back to break a deadlock or a serialization
    conflict: the same request, sent again, succeeds. Registered per exception type (not on
    ``Exception``) so Starlette handles it without re-raising; anything else is an ordinary 500.
    """
    if is_transaction_conflict(exc):
        log.warning("database.conflict", path=request.url.path, error=type(exc).__name__)
        return problem_response(
            request,
            status=503,
            title="Concurrent request conflict",
            slug="transaction-conflict",
            detail="This request collided with a concurrent one and was rolled back; nothing "
            "was changed. Retry it.",
            headers={"Retry-After": str(CONFLICT_RETRY_AFTER_SECONDS)},
        )
    if not _is_database_unavailable(exc):
        return await unexpected_error(request, exc)
    log.warning("database.unavailable", path=request.url.path, error=type(exc).__name__)
    return problem_response(
        request,
        status=503,
        title="Database unavailable",
        slug="database-unavailable",
        detail="The database cannot be reached; nothing was changed. Retry shortly.",
        headers={"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)},
    )


async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    # The traceback goes to the log; the client gets no internals.
    log.error("request.failed", path=request.url.path, exc_info=exc)
    return problem_response(request, status=500, title="Internal error", slug="internal")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(HeraldError, herald_problem)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    for database_error in DATABASE_TROUBLE:
        app.add_exception_handler(database_error, _database_error)
    app.add_exception_handler(Exception, unexpected_error)


def problem_response_doc(description: str) -> dict[str, Any]:
    return {"model": Problem, "description": description, "content": {PROBLEM_JSON: {}}}


def problem_responses(*errors: type[HeraldError]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for a route: each problem it can answer with, plus the validation
    problem (422) and the database outage or transaction conflict (503) any route can meet."""
    responses: dict[int | str, dict[str, Any]] = {
        422: problem_response_doc("Request validation failed"),
        503: problem_response_doc(
            "Database unavailable, or the request collided with a concurrent one; nothing was "
            "changed: retry after Retry-After seconds"
        ),
    }
    for error in errors:
        if error.status in responses:
            # Several problems share a status (422: validation, key reuse, refused URL).
            described = responses[error.status]["description"]
            responses[error.status] = problem_response_doc(f"{described}; {error.title}")
        else:
            responses[error.status] = problem_response_doc(error.title)
    return responses
