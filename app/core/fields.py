"""Field types the API's models (each domain's schemas) share, and the rules behind them: ids,
event types and their selectors, printable and storable text, idempotency and ordering keys,
timestamps, how deep a payload may nest. The repositories and the programs keep to the same
rules, so they live in the kernel; a page of results is the HTTP plumbing's
(app/api/pagination.py).

Each rule lives here once and answers in words. pydantic's own ``pattern=`` would answer
"String should match pattern '^[^\\x00-\\x20\\x7f]+$'", which helps nobody; a ``TextRule`` checks
the same regular expression but says what is allowed, and keeps the expression in the OpenAPI
document for clients that validate on their side. A rule holds the whole string: in Python,
``re.match`` with ``$`` lets a final line break through (``$`` matches before it), so rules are
checked with ``fullmatch``, here and wherever else a regular expression judges input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from app.core.ids import describe_id, id_regex

# How deep a payload's objects and arrays may nest (the payload itself is level 1). Whatever
# Herald accepts, a receiver must be able to parse: 64 is .NET's System.Text.Json default, the
# lowest of the common parsers' limits (Ruby 100, serde_json 128, Python ~1000).
MAX_PAYLOAD_DEPTH = 64


@dataclass(frozen=True)
class TextRule:
    """A string must match ``pattern``; if it does not, the message is ``allowed``."""

    pattern: str
    allowed: str
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_regex", re.compile(self.pattern))

    def matches(self, value: str) -> bool:
        """Whether the whole of ``value`` keeps the rule (``"a.b\\n"`` does not keep
        ``^[a-z.]+$``, though ``re.match`` says it does)."""
        return self._regex.fullmatch(value) is not None

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        allowed = self.allowed

        def check(value: str) -> str:
            if not self.matches(value):
                raise PydanticCustomError("text_rule", allowed)
            return value

        return core_schema.no_info_after_validator_function(check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        json_schema = handler(schema)
        json_schema["pattern"] = self.pattern
        return json_schema


def id_rule(prefix: str) -> TextRule:
    """The id rule of ``app.core.ids`` for one kind of id, as a field constraint (422 in a body or a
    query; a path answers 404 instead, see ``app.api.paths``)."""
    return TextRule(id_regex(prefix), f"must be {describe_id(prefix)}")


EndpointId = Annotated[str, id_rule("ep")]
EventId = Annotated[str, id_rule("evt")]
TenantId = Annotated[str, id_rule("ten")]
KeyId = Annotated[str, id_rule("key")]

# The tenant's own id for one of its customers: what it already calls them (cus_123, a UUID,
# an account number), safe in a URL path as it is.
CUSTOMER_ID_RULE = TextRule(
    r"^[A-Za-z0-9][A-Za-z0-9_.:@+\-]{0,127}$",
    "must be 1-128 characters: letters, digits and _ . : @ + - (starting with a letter or digit)",
)
CustomerId = Annotated[str, CUSTOMER_ID_RULE]

# No NUL anywhere: PostgreSQL text cannot hold it, and a query carrying one fails.
EVENT_TYPE_RULE = TextRule(
    r"^[A-Za-z0-9][A-Za-z0-9_.:\-/]{0,254}$",
    "must be 1-255 characters: letters, digits and _ . : - / (starting with a letter or digit)",
)
EventType = Annotated[str, EVENT_TYPE_RULE]


# Where event types select (subscriptions, filters): an exact type, every type (``*``), or a
# type's family, ``<prefix>.*`` -- every type that starts with ``<prefix>.``, at any depth
# (``order.*``: order.paid and order.item.shipped, not orders.x). No other wildcard.
EVERY_TYPE = "*"
EVENT_TYPE_SELECTOR_RULE = TextRule(
    r"^(\*|[A-Za-z0-9][A-Za-z0-9_.:\-/]{0,252}\.\*|[A-Za-z0-9][A-Za-z0-9_.:\-/]{0,254})$",
    "must be an event type (1-255 characters: letters, digits and _ . : - /, starting with a "
    "letter or digit), * for every type, or a prefix and .* (order.* selects order.paid and "
    "order.item.shipped)",
)
EventTypeSelector = Annotated[str, EVENT_TYPE_SELECTOR_RULE]


def selectors_of(event_type: str) -> list[str]:
    """Every selector that selects ``event_type``: itself, each family it is in, and ``*``.
    A subscription matches when it holds any of them -- one array overlap, no pattern scan."""
    segments = event_type.split(".")
    families = [".".join(segments[:n]) + ".*" for n in range(len(segments) - 1, 0, -1)]
    return [event_type, *families, EVERY_TYPE]


def family_of(selector: str) -> str | None:
    """The prefix a family selector stands for (``order.*`` -> ``order.``), ``""`` for ``*``;
    None for an exact type."""
    if selector == EVERY_TYPE:
        return ""
    return selector[:-1] if selector.endswith(".*") else None


# Herald's own event types, the operational events (app/signals/): a namespace no tenant's
# event or catalogue entry may use, and which only a tenant's own endpoints may subscribe to.
HERALD_TYPES = "herald."


def is_herald_type(name: str) -> bool:
    return name.startswith(HERALD_TYPES)


def _yours(name: str) -> str:
    if is_herald_type(name):
        raise PydanticCustomError(
            "reserved_type",
            "must not start with herald.: that namespace is Herald's own events (operational "
            "events, GET /v1/operational-event-types)",
        )
    return name


# A tenant's event type, where Herald's own are refused: an intent's, a catalogue entry's.
TenantEventType = Annotated[str, EVENT_TYPE_RULE, AfterValidator(_yours)]


def subscribes_to_herald(selectors: list[str] | None) -> bool:
    """Whether a subscription is to Herald's own events -- all of it, as ``one_namespace``
    holds every saved subscription to."""
    return bool(selectors) and all(is_herald_type(s) for s in selectors or ())


def _one_namespace(selectors: list[str]) -> list[str]:
    if any(is_herald_type(s) for s in selectors) and not subscribes_to_herald(selectors):
        raise PydanticCustomError(
            "mixed_subscription",
            "must be either Herald's own event types (herald.*) or yours, not both: an endpoint "
            "for Herald's events is one of its own, whose deliveries tell of nothing",
        )
    return selectors


ONE_NAMESPACE = AfterValidator(_one_namespace)


# What PostgreSQL refuses in text and jsonb: the NUL character, and an unpaired UTF-16
# surrogate (JSON's \ud800 escape carries one; UTF-8 cannot encode it). Most fields refuse
# both by their own rule; these are for text that is otherwise free (a filter's literals, a
# schema's keys and constants).
UNSTORABLE = (
    "the NUL character (\\u0000) or an unpaired UTF-16 surrogate, which PostgreSQL cannot store"
)


def is_storable(text: str) -> bool:
    if "\x00" in text:
        return False
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def unstorable_at(value: Any) -> str | None:
    """Where, in a JSON value, a key or a string is not storable: a JSON pointer (with the
    offending characters shown as ?), or None. By worklist: JSON may nest deeper than Python
    recurses."""
    waiting: list[tuple[str, Any]] = [("", value)]
    while waiting:
        at, node = waiting.pop()
        if isinstance(node, str) and not is_storable(node):
            return at or "/"
        if isinstance(node, dict):
            for key, item in node.items():
                part = _shown(key).replace("~", "~0").replace("/", "~1")
                if not is_storable(key):
                    return f"{at}/{part}"
                waiting.append((f"{at}/{part}", item))
        elif isinstance(node, list):
            waiting += [(f"{at}/{i}", item) for i, item in enumerate(node)]
    return None


def _shown(key: str) -> str:
    return "".join(c if c.isprintable() and is_storable(c) else "?" for c in key[:60])


def _storable_text(value: str) -> str:
    if not is_storable(value):
        raise PydanticCustomError("text_rule", f"must not hold {UNSTORABLE}")
    return value


def _storable_json(value: Any) -> Any:
    where = unstorable_at(value)
    if where is not None:
        raise PydanticCustomError("text_rule", f"holds {UNSTORABLE} at {{where}}", {"where": where})
    return value


STORABLE_TEXT = AfterValidator(_storable_text)
STORABLE_JSON = AfterValidator(_storable_json)


# Printable text: no NUL and no control characters but tab and line breaks.
PRINTABLE_RULE = TextRule(
    r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f]*$",
    "must be printable text: no NUL or other control characters except tab and line breaks",
)
ONE_LINE_RULE = TextRule(
    r"^[^\x00-\x1f\x7f]+$",
    "must be printable text on one line: no NUL, tab, line break or other control character",
)

IDEMPOTENCY_KEY_RULE = "must be 1-255 printable ASCII characters (space to ~)"


def is_idempotency_key(key: str) -> bool:
    return 1 <= len(key) <= 255 and all(0x20 <= ord(ch) <= 0x7E for ch in key)


IdempotencyKey = Annotated[str, TextRule(r"^[\x20-\x7e]{1,255}$", IDEMPOTENCY_KEY_RULE)]

# Sent as a header value (Herald-Ordering-Key): no spaces, which HTTP would trim from its ends.
OrderingKey = Annotated[
    str,
    TextRule(
        r"^[\x21-\x7e]{1,255}$",
        "must be 1-255 visible ASCII characters (! to ~, no spaces)",
    ),
]


def _representable(value: datetime) -> datetime:
    # Python holds years 1-9999 and PostgreSQL's range is wider: a time that leaves that range
    # once converted to UTC (year 1 at +14:00) could not be compared or stored later.
    try:
        value.astimezone(UTC)
    except OverflowError:
        raise PydanticCustomError(
            "datetime_range", "must lie between 0001-01-01 and 9999-12-31 once converted to UTC"
        ) from None
    return value


Timestamp = Annotated[AwareDatetime, AfterValidator(_representable)]
