"""Keyset pagination: ask for one row more than the page to learn whether another page exists."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from typing import Annotated, TypeVar

from fastapi import Query

from app.errors import BadRequest
from app.ids import ID_PATTERN
from app.schemas.common import Page

Row = TypeVar("Row")
Item = TypeVar("Item")

Limit = Annotated[int, Query(ge=1, le=200, description="Page size.")]
Cursor = Annotated[str | None, Query(max_length=200, description="next_cursor of the last page.")]


def encode_cursor(value: str | int) -> str:
    return base64.urlsafe_b64encode(str(value).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None, valid: Callable[[str], bool]) -> str | None:
    """The position a cursor encodes; 400 for anything this API did not hand out."""
    if cursor is None:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        position = base64.b64decode(padded, altchars=b"-_", validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadRequest("invalid cursor") from None
    if not valid(position):
        raise BadRequest("invalid cursor")
    return position


def decode_id_cursor(cursor: str | None) -> str | None:
    return decode_cursor(cursor, lambda position: ID_PATTERN.match(position) is not None)


def decode_number_cursor(cursor: str | None) -> int | None:
    position = decode_cursor(cursor, lambda p: p.isdigit() and len(p) < 10)
    return None if position is None else int(position)


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
