"""The programs an endpoint may carry, as fields: a filter (app/programs/filters.py) and a
transformation (app/programs/transformations.py), each compiled and bounded when saved -- a
422 in words when it cannot run."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, StringConstraints
from pydantic_core import PydanticCustomError

from app.core.fields import STORABLE_TEXT


def _compiles(expression: str) -> str:
    # Imported here: the worker reads these models (the header rules) but never compiles a
    # filter, and CEL's runtime is a 50 MB library -- the API loads it with its first filter.
    from app.programs import filters

    try:
        filters.compiled(expression)
    except filters.FilterError as exc:
        raise PydanticCustomError("filter", str(exc)) from None
    return expression


EndpointFilter = Annotated[
    str, StringConstraints(min_length=1), STORABLE_TEXT, AfterValidator(_compiles)
]
FILTER_DOC = (
    "A Common Expression Language expression over the event -- `type` and `payload` -- that "
    "must be true for it to be delivered here, e.g. `payload.amount > 100 && payload.currency == "
    '"EUR"`. Checked when saved; an event it fails on (a missing field) is not delivered. '
    "`GET /v1/events/{id}` lists the endpoints a filter passed by."
)


def _transforms(source: str) -> str:
    # Imported here, as a filter's check is: the worker reads these models but loads CEL only
    # for a delivery that has a transformation.
    from app.programs import transformations

    try:
        transformations.compiled(source)
    except transformations.TransformationError as exc:
        raise PydanticCustomError("transformation", str(exc)) from None
    return source


EndpointTransformation = Annotated[
    str, StringConstraints(min_length=1), STORABLE_TEXT, AfterValidator(_transforms)
]
TRANSFORMATION_DOC = (
    "A Common Expression Language program over the event -- `type` and `payload` -- that makes "
    "the request: a map of `body` (any JSON, sent in place of the endpoint's own body), "
    "`headers` (sent besides the static ones, under their rules), `path` (added to the URL's "
    "path), `query` (added to its query) and `skip` (true: not sent; the delivery ends "
    '`cancelled`, skipped), e.g. `{"body": {"text": "Order " + payload.id + " paid"}}`. '
    "Checked and bounded when saved, as a filter is; a delivery is sent as the transformation "
    "its endpoint had when it was accepted, on every attempt. Not for CloudEvents endpoints, "
    "whose body is the CloudEvent."
)
