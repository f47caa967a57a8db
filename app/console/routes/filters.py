"""The dead-letter page's filter, read from a query string or a form: the same fields as a bulk
redrive's, so "redrive every match" redrives exactly what the page lists."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pydantic import ValidationError

from app.core.errors import Unprocessable
from app.delivery.schemas import RedriveFilter

FIELDS = ("endpoint_id", "event_type", "dead_after", "dead_before")
_LABELS = {"dead_after": "Died after", "dead_before": "Died before"}


def _utc_unless_zoned(text: str) -> str:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return text  # the filter's validation says what is wrong with it
    return text if moment.tzinfo is not None else text + "Z"


def dead_filter(values: Mapping[str, str]) -> RedriveFilter:
    """The filter the fields describe (empty ones left out; times without a zone are UTC, as
    the page shows them); 422 in words when a field is not what it should be."""
    given = {k: values[k].strip() for k in FIELDS if values.get(k, "").strip()}
    for name in ("dead_after", "dead_before"):
        if name in given:
            given[name] = _utc_unless_zoned(given[name])
    try:
        return RedriveFilter.model_validate({**given, "states": ["dead"]})
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error["loc"] else "filter"
        if field in _LABELS:
            said = "give a date and time, such as 2026-12-01T09:30 (UTC)"
            raise Unprocessable(f"{_LABELS[field]}: {said}") from None
        label = field.replace("_", " ").capitalize()
        raise Unprocessable(f"{label}: {error['msg']}") from None
