"""Why a request body is not JSON Herald can read, said so that a person knows what to change.

The decoder's own complaints are terse, and those that end in "at" ("Unterminated string
starting at") expect the decoder's position to follow. Herald gives the position as a person
counts it (line and column) and, for each complaint, what is wrong in plain words.
"""

from __future__ import annotations

import json
import sys

# Every complaint of CPython's JSON decoder, by how it begins (the C scanner's words; the pure
# Python decoder adds the offending character, which is the client's input and not repeated).
_COMPLAINTS = (
    ("Expecting value", "expected a value (an object, array, string, number, true, false or null)"),
    ("Expecting property name", "expected a property name in double quotes"),
    ("Expecting ':' delimiter", "expected ':' after the property name"),
    ("Expecting ',' delimiter", "expected ',' or the closing } or ]"),
    ("Unterminated string", 'a string starts here and is never closed with "'),
    (
        "Invalid control character",
        "a control character (a tab, a line break) inside a string: write it escaped, "
        "as \\t or \\n",
    ),
    ("Invalid \\uXXXX escape", "\\u in a string must be followed by four hexadecimal digits"),
    (
        "Invalid \\escape",
        'a backslash in a string starts an escape: \\" \\\\ \\/ \\b \\f \\n \\r \\t or \\u and '
        "four hexadecimal digits",
    ),
    ("Extra data", "more after the JSON value: the body must be a single JSON value"),
    ("Illegal trailing comma", "a comma before the closing } or ]: remove it"),  # Python 3.13+
)


def malformed_json(complaint: str, document: str, position: int) -> str:
    """What ``json.loads(document)`` complained of at ``position``, with its line and column."""
    located = json.JSONDecodeError(complaint, document, position)
    said = next(
        (words for start, words in _COMPLAINTS if complaint.startswith(start)),
        complaint.removesuffix(" at"),  # a complaint of a later Python, in its own words
    )
    return f"the body is not valid JSON at line {located.lineno}, column {located.colno}: {said}"


def is_number_too_long(error: BaseException | None) -> bool:
    """Whether decoding failed on an integer longer than Python converts
    (``sys.get_int_max_str_digits``, 4300 digits by default: a guard against quadratic time)."""
    return type(error) is ValueError and "integer string conversion" in str(error)


def number_too_long() -> str:
    return (
        f"a number in the body has more than {sys.get_int_max_str_digits()} digits, more than "
        "Herald reads: send a number that long as a string"
    )
