"""What the audit trail keeps of an endpoint: its configuration as the API shows it -- a secret
named, never its value -- without the health the workers keep (failures, pauses, the
breaker), which changes by itself and is no one's act."""

from __future__ import annotations

from typing import Any

from app.endpoints.schemas import EndpointOut
from app.models import Endpoint

_CONFIGURATION = (
    "url",
    "customer_id",
    "description",
    "event_types",
    "operational",
    "filter",
    "transformation",
    "rate_limit_per_second",
    "max_in_flight",
    "enabled",
    "disabled_reason",
    "payload_format",
    "signature_schemes",
    "public_key",
    "headers",
    "secret_header_names",
    "oauth2",
    "tls",
    "egress_proxy",
    "webhook_handshake",
    "webhook_origin",
    "ordering",
    "on_dead",
    "final_statuses",
)


def endpoint_view(endpoint: Endpoint) -> dict[str, Any]:
    shown = EndpointOut.model_validate(endpoint).model_dump(mode="json")
    return {name: shown[name] for name in _CONFIGURATION}
