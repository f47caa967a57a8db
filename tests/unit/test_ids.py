"""Ids: the fast encoding is the ULID encoding, and ids made in a row sort in creation order."""

from __future__ import annotations

from datetime import UTC, datetime

from app.core import ids

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid_digits(value: int) -> str:
    """The definition: 26 base32 digits, most significant first, one divmod at a time."""
    digits = []
    for _ in range(26):
        value, digit = divmod(value, 32)
        digits.append(_CROCKFORD[digit])
    return "".join(reversed(digits))


def test_an_id_is_its_millisecond_and_random_bits_in_crockford_base32() -> None:
    made = ids.new_id("dlv")
    # Read back the state the id was made from (the generator's last millisecond and bits).
    assert made == "dlv_" + ulid_digits((ids._last_ms << 80) | ids._last_random)
    assert ids.looks_like("dlv", made)


def test_ids_made_in_a_row_are_distinct_and_sorted() -> None:
    made = [ids.new_id("evt") for _ in range(20_000)]  # many share a millisecond
    assert len(set(made)) == len(made)
    assert made == sorted(made)


def test_id_floor_is_the_smallest_id_of_its_millisecond() -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
    milliseconds = int(moment.timestamp() * 1000)
    assert ids.id_floor("dlv", moment) == "dlv_" + ulid_digits(milliseconds << 80)
    assert ids.id_floor("dlv", moment) < ids.new_id("dlv")


def test_an_id_with_a_trailing_newline_is_no_id() -> None:
    # `$` matches before a final "\n": a pattern that only anchors there let "dlv_...\n" through.
    made = ids.new_id("dlv")
    assert ids.is_id(made) and ids.looks_like("dlv", made)
    for spoiled in (made + "\n", "\n" + made, made + "\r\n", made + "\n\n"):
        assert not ids.is_id(spoiled), repr(spoiled)
        assert not ids.looks_like("dlv", spoiled), repr(spoiled)
