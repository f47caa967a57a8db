from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel, Field

Item = TypeVar("Item")

EVENT_TYPE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:\-/]{0,254}$"
# Printable text: no NUL (PostgreSQL text cannot hold it) and no control characters but tab
# and line breaks.
PRINTABLE_PATTERN = r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f]*$"


class Page(BaseModel, Generic[Item]):
    """One page of a keyset-paginated list; pass ``next_cursor`` back as ``cursor`` for the
    next page. ``null`` means this was the last page."""

    items: list[Item]
    next_cursor: str | None = Field(default=None)
