"""Endpoint filters: Common Expression Language over an event -- ``type`` (its event type) and
``payload`` (the payload as accepted) -- for example
``payload.amount > 100 && payload.currency == "EUR"``.

A filter is compiled when the endpoint is saved (a 422 says where it is wrong), cached compiled,
and evaluated at fan-out in a few microseconds. CEL has no loops or recursion; the one costly
construct is a comprehension over a list. So that every filter costs at most linear time in the
payload (itself bounded in size) times its own length (``MAX_LENGTH``): a filter holds at most
one comprehension, whose body sees only its own variable -- ``payload.a.all(x, x in payload.a)``
would be quadratic -- and no comments (they could hide a second one from this check).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import cel

MAX_LENGTH = 1000
VARIABLES = ("type", "payload")
# Receiver-style macros that loop over a list or map (`payload.lines.exists(l, l.qty > 2)`).
_COMPREHENSION = re.compile(r"\.\s*(all|exists_one|exists|map|filter)\s*\(\s*([A-Za-z_]\w*)?")
# CEL's string and bytes literals: triple-quoted, quoted, with r/b prefixes and escapes.
_STRING = re.compile(
    r"[rRbB]{0,2}(?:\"\"\"(?:\\.|[^\\])*?\"\"\"|'''(?:\\.|[^\\])*?'''"
    r"|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*')",
    re.DOTALL,
)
_POSITION = re.compile(r"<input>:(\d+):(\d+): (?:Syntax error: )?([^\n]*)")


class FilterError(ValueError):
    """Why a filter cannot be saved, in words (it names the position of a syntax error)."""


@functools.lru_cache(maxsize=4096)
def compiled(expression: str) -> Any:
    """The expression compiled, once per distinct text in this process; FilterError if it is
    not a filter Herald runs."""
    if len(expression) > MAX_LENGTH:
        raise FilterError(f"a filter is at most {MAX_LENGTH} characters")
    try:
        program = cel.compile(expression)
    except ValueError as exc:
        raise FilterError(_syntax_error(str(exc))) from None
    code = _STRING.sub('""', expression)  # what is not inside a string literal
    if "//" in code:
        raise FilterError("a filter may not hold comments")
    comprehensions = list(_COMPREHENSION.finditer(code))
    if len(comprehensions) > 1:
        raise FilterError(
            "a filter may hold at most one all, exists, exists_one, map or filter (each loops "
            "over the payload)"
        )
    if comprehensions and re.search(r"\bpayload\b", _body(code, comprehensions[0].end())):
        raise FilterError(
            "inside all, exists, exists_one, map or filter, use the element's variable, not "
            "payload (that would loop over the payload once per element)"
        )
    bound = {match.group(2) for match in comprehensions if match.group(2)}
    unknown = sorted(set(program.variables()) - set(VARIABLES) - bound)
    if unknown:
        raise FilterError(f"unknown name {unknown[0]}: a filter sees type and payload")
    return program


def _body(code: str, start: int) -> str:
    """The text from ``start`` up to the parenthesis that closes the one before it."""
    depth = 1
    for end in range(start, len(code)):
        depth += {"(": 1, ")": -1}.get(code[end], 0)
        if depth == 0:
            return code[start:end]
    return code[start:]


def _syntax_error(message: str) -> str:
    found = _POSITION.search(message)
    if found is None:
        return "not a valid CEL expression"
    line, column, what = found.groups()
    what = what.split(" expecting ")[0]  # the token list is the parser's, not the reader's
    what = what.replace("mismatched input '<EOF>'", "the expression ends too early")
    what = what.replace("{", "(").replace("}", ")")
    return f"not a valid CEL expression: at line {line}, column {column}: {what}"


def matches(expression: str, event_type: str, payload: dict[str, Any]) -> tuple[bool, str | None]:
    """Whether the event passes the filter; when it does not, why, in words. A filter that
    fails on this event (a missing field, a type mismatch) or gives anything but a boolean lets
    nothing through: an endpoint gets only what its filter says yes to."""
    try:
        verdict = compiled(expression).execute({"type": event_type, "payload": payload})
    except FilterError as exc:  # saved under older rules
        return False, f"the filter cannot run: {exc}"
    except Exception as exc:
        return False, f"the filter failed on this event: {_evaluation_error(exc)}"
    if verdict is True:
        return True, None
    if verdict is False:
        return False, "the filter said false"
    return False, f"the filter gave {type(verdict).__name__}, not true or false"


def _evaluation_error(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"no field {exc.args[0]!s}"  # use has(payload.x) to test for a field first
    return str(exc).split(". ")[0][:200]
