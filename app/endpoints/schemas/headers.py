"""The static header rules: which names and values an endpoint's headers (plain and secret,
counted together) may hold, checked at save and again at every send."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

# Headers a static header may not set: the connection's framing and hop-by-hop headers, and
# what Herald sets on every attempt (the body's type, the idempotency key, the signature).
_FRAMING = {
    "host", "content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer",
    "upgrade", "expect", "proxy-connection", "proxy-authorization", "proxy-authenticate",
    "content-encoding",
}  # fmt: skip
_HERALDS = {"content-type", "idempotency-key", "user-agent"}
# Herald's own header families: Standard Webhooks', Herald's, and the CloudEvents attributes.
_HERALD_PREFIXES = ("webhook-", "herald-", "ce-")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")  # an RFC 9110 token
_HEADER_VALUE = re.compile(r"^[\t\x20-\x7e]{0,1000}$")
MAX_HEADERS = 20
MAX_HEADER_BYTES = 8 * 1024
_NAME_RULE = "a header name must be 1-100 letters, digits or !#$%&'*+.^_`|~- (one is not)"


def _value_rule(name: str) -> str:
    return (
        f"the value of the header {name} must be printable ASCII (tab allowed), at most 1000 "
        "characters"
    )


def header_fault(headers: Mapping[str, object]) -> str | None:
    """Why ``headers`` are not HTTP header fields at all (a name that is no token, a value with
    a line break or other control character, a value that is no text), or None. The syntax of
    the save rule below, which every send checks again: a row saved before the rule held the
    whole string (or by hand) can hold what no request may carry."""
    for name, value in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            return _NAME_RULE
        if not isinstance(value, str) or not _HEADER_VALUE.fullmatch(value):
            return _value_rule(name)
    return None


def combined_header_fault(headers: Mapping[str, str]) -> str | None:
    """Why ``headers`` may not be an endpoint's static headers -- what would break the protocol
    or the signature, or is no header at all -- naming the header, never echoing a value (it may
    be a credential); None when they may. The plain and the secret ones are held to it together."""
    if len(headers) > MAX_HEADERS:
        return f"at most {MAX_HEADERS} headers per endpoint, secret ones included"
    if sum(len(name) + len(value) for name, value in headers.items()) > MAX_HEADER_BYTES:
        return f"the headers may hold at most {MAX_HEADER_BYTES} bytes in all"
    seen: set[str] = set()
    for name, value in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            return _NAME_RULE
        lower = name.lower()
        if lower in seen:
            return f"the header {name} is given twice (header names ignore case)"
        seen.add(lower)
        if lower in _FRAMING:
            return f"the header {name} belongs to the connection: it cannot be set"
        if lower in _HERALDS or lower.startswith(_HERALD_PREFIXES):
            return f"the header {name} is set by Herald on every attempt: it cannot be set"
        if not _HEADER_VALUE.fullmatch(value):
            return _value_rule(name)
    return None


def _vet_headers(headers: dict[str, str]) -> dict[str, str]:
    fault = combined_header_fault(headers)
    if fault is not None:
        raise PydanticCustomError("header", fault)
    return headers


EndpointHeaders = Annotated[dict[str, str], AfterValidator(_vet_headers)]
