"""Keyset pagination: ask for one row more than the page to learn whether another page exists;
the ``Page`` every list answers with."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from typing import Annotated, Generic, TypeVar

from fastapi import Query
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field

from app.core.ids import looks_like

Row = TypeVar("Row")
Item = TypeVar("Item")


class Page(BaseModel, Generic[Item]):
    """One page of a keyset-paginated list; pass ``next_cursor`` back as ``cursor`` for the
    next page. ``null`` means this was the last page."""

    items: list[Item]
    next_cursor: str | None = Field(default=None)


Limit = Annotated[int, Query(ge=1, le=200, description="Page size.")]
Cursor = Annotated[str | None, Query(max_length=200, description="next_cursor of the last page.")]


def encode_cursor(value: str | int) -> str:
    return base64.urlsafe_b64encode(str(value).encode()).decode().rstrip("=")


def _not_ours() -> RequestValidationError:
    # A query parameter like any other: 422 in the validation problem's shape, naming it.
    return RequestValidationError(
        [
            {
                "loc": ("query", "cursor"),
                "msg": "must be a next_cursor this list returned, passed back unchanged",
                "type": "cursor",
            }
        ]
    )


def decode_cursor(cursor: str | None, valid: Callable[[str], bool]) -> str | None:
    """The position a cursor encodes; 422 for anything this API did not hand out."""
    if cursor is None:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        position = base64.b64decode(padded, altchars=b"-_", validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise _not_ours() from None
    if not valid(position):
        raise _not_ours()
    return position


def decode_id_cursor(cursor: str | None, prefix: str) -> str | None:
    """A cursor over a list of ``prefix`` ids holds one of them (the id rule of
    ``app.core.ids``)."""
    return decode_cursor(cursor, lambda position: looks_like(prefix, position))


def decode_number_cursor(cursor: str | None) -> int | None:
    position = decode_cursor(cursor, lambda p: p.isdigit() and len(p) < 10)
    return None if position is None else int(position)


# A stream's cursor is its key behind a prefix: the keyless stream's key is '', and an empty
# cursor would read as no cursor at all.
_STREAM = "s:"


def stream_position(ordering_key: str | None) -> str:
    return _STREAM + (ordering_key or "")


def decode_stream_cursor(cursor: str | None) -> str | None:
    position = decode_cursor(
        cursor, lambda p: p.startswith(_STREAM) and len(p) <= 255 + len(_STREAM)
    )
    return None if position is None else position.removeprefix(_STREAM)


def page_of(
    rows: Sequence[Row],
    limit: int,
    to_item: Callable[[Row], Item],
    position: Callable[[Item], str | int],
) -> Page[Item]:
    """``rows`` was fetched with ``limit + 1``; the extra row only says "there is more"."""
    items = [to_item(row) for row in rows[:limit]]
    more = len(rows) > limit
    return Page[Item](items=items, next_cursor=encode_cursor(position(items[-1])) if more else None)
