"""Routes whose parameters are resolved by hand: for the hottest route, FastAPI's per-request work.

A FastAPI route solves its dependencies, parses and validates its body and then validates and
serialises what it returns -- generic work that was half of the API's CPU per accepted intent
(docs/benchmarks.md, "Accept"). ``served_by`` keeps a route's FastAPI declaration, which is its
OpenAPI document and its one implementation, and swaps only that machinery for a handler that
resolves the route's parameters itself and calls the endpoint with them.

The handler must answer every request as the generic route would: the same checks in the same
order (a malformed JSON body, then 415, then authentication, then the headers, then the body's
validation), raising the same exceptions, so that the app's exception handlers render the same
problems. The route's tests run against the served route, the only one there is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException

from app.api.deps import require_json_media_type
from app.runtime.resources import Resources

Handler = Callable[[Request], Coroutine[Any, Any, Response]]
Model = TypeVar("Model", bound=BaseModel)


def served_by(handler: Handler) -> type[APIRoute]:
    """An APIRoute class whose requests ``handler`` answers instead of FastAPI's handler."""

    class Served(APIRoute):
        def get_route_handler(self) -> Handler:
            return handler

    return Served


def resources_of(request: Request) -> Resources:
    resources: Resources = request.app.state.resources
    return resources


async def json_body(request: Request) -> Any:
    """The body as JSON, as FastAPI reads a JSON body: absent when empty, 422 when malformed,
    400 when undecodable, and 415 when sent as anything but JSON."""
    body = await request.body()
    if not body:
        return None
    require_json_media_type(request.headers.get("content-type", ""))
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        error = {
            "type": "json_invalid",
            "loc": ("body", exc.pos),
            "msg": "JSON decode error",
            "input": {},
            "ctx": {"error": exc.msg},
        }
        raise RequestValidationError([error], body=exc.doc) from exc
    except Exception as exc:  # RecursionError, UnicodeDecodeError: errors.py words them
        raise HTTPException(400, "There was an error parsing the body") from exc


def validated(model: type[Model], body: Any) -> Model:
    """``body`` as ``model``, or the validation problem FastAPI reports for a body parameter."""
    if body is None:
        missing = {"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}
        raise RequestValidationError([missing])
    try:
        # As FastAPI validates a body (which is why a list is "no object to extract fields from").
        return model.model_validate(body, from_attributes=True)
    except ValidationError as exc:
        errors = [{**error, "loc": ("body", *error["loc"])} for error in exc.errors()]
        raise RequestValidationError(errors, body=body) from None


def json_response(
    content: BaseModel, status_code: int, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        content.model_dump_json(),
        status_code=status_code,
        media_type="application/json",
        headers=headers,
    )
