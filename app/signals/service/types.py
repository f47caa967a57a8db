"""Herald's own event types: the operational events, each with what it tells and the JSON
Schema of its payload (from app/signals/schemas.py), as the catalogue shows them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from app.signals.schemas import (
    DeliveryDead,
    EndpointCreated,
    EndpointDeleted,
    EndpointDisabled,
    EndpointEnabled,
    EndpointFailing,
    EndpointRecovered,
    EndpointUpdated,
    StreamHalted,
)

_AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
_SUBJECT = {
    "endpoint_id": "ep_01KC0000000000000000000000",
    "customer_id": None,
    "url": "https://example.com/webhooks",
    "occurred_at": _AT,
}


@dataclass(frozen=True)
class OperationalType:
    name: str
    description: str
    payload: type[BaseModel]
    example: dict[str, Any]

    def schema(self) -> dict[str, Any]:
        return self.payload.model_json_schema()

    def example_json(self) -> dict[str, Any]:
        return self.payload.model_validate(self.example).model_dump(mode="json")


OPERATIONAL_TYPES = (
    OperationalType(
        "herald.endpoint.created",
        "An endpoint was created (by the tenant, its customer, the console or the CLI).",
        EndpointCreated,
        {**_SUBJECT, "description": "Orders", "event_types": ["order.*"], "enabled": True},
    ),
    OperationalType(
        "herald.endpoint.updated",
        "An endpoint's settings were changed: the fields the change set.",
        EndpointUpdated,
        {**_SUBJECT, "changed": ["url", "secret_headers"]},
    ),
    OperationalType(
        "herald.endpoint.deleted", "An endpoint was deleted.", EndpointDeleted, _SUBJECT
    ),
    OperationalType(
        "herald.endpoint.disabled",
        "An endpoint was disabled: by its receiver's 410 Gone, by Herald after a failing streak "
        "too long, or by a person. Nothing is sent to it until it is enabled again.",
        EndpointDisabled,
        {**_SUBJECT, "reason": "receiver answered 410 Gone"},
    ),
    OperationalType(
        "herald.endpoint.enabled",
        "A disabled endpoint was enabled again.",
        EndpointEnabled,
        _SUBJECT,
    ),
    OperationalType(
        "herald.endpoint.failing",
        "An endpoint's attempts failed so many times in a row (the tenant's failing_after).",
        EndpointFailing,
        {**_SUBJECT, "consecutive_failures": 5, "failing_since": _AT},
    ),
    OperationalType(
        "herald.endpoint.recovered",
        "A failing endpoint answered an attempt with success.",
        EndpointRecovered,
        {**_SUBJECT, "failures": 7, "failing_since": _AT},
    ),
    OperationalType(
        "herald.delivery.dead",
        "A delivery ended without success: its attempts ran out, its receiver refused it, or "
        "it was cancelled.",
        DeliveryDead,
        {
            **_SUBJECT,
            "delivery_id": "dlv_01KC0000000000000000000000",
            "event_id": "evt_01KC0000000000000000000000",
            "event_type": "order.paid",
            "state": "dead",
            "reason": "max_attempts_exhausted (8)",
            "attempts": 8,
            "last_status_code": 503,
        },
    ),
    OperationalType(
        "herald.stream.halted",
        "An ordered stream stopped behind its dead head, and waits for an operator's skip or "
        "redrive.",
        StreamHalted,
        {**_SUBJECT, "stream": "order-77", "head_delivery_id": "dlv_01KC0000000000000000000000"},
    ),
)
BY_NAME = {t.name: t for t in OPERATIONAL_TYPES}
