"""What a customer may set on its own endpoints, from its portal or with its session on /v1."""

from __future__ import annotations

from app.core.errors import Forbidden
from app.core.scope import Scope
from app.endpoints.schemas import EndpointCreate, EndpointUpdate
from app.tenants.service.customer_sessions import Visitor

# What a customer sets on its own endpoints (its portal, or /v1 with its session): where its
# receiver is and what it wants sent, how. The rest -- ceilings, the credentials, headers and
# proxy Herald presents, the handshake, ordering -- is its tenant's to set.
CUSTOMER_FIELDS = frozenset(
    {
        "url",
        "customer_id",
        "description",
        "event_types",
        "enabled",
        "payload_format",
        "signature_schemes",
        "filter",
        "transformation",  # with its session's transform_endpoints (the routes ask)
        "final_statuses",
    }
)


def check_customer_fields(scope: Scope, spec: EndpointCreate | EndpointUpdate) -> None:
    """Forbidden when a customer's request sets a field its tenant keeps."""
    if scope.customer_id is None:
        return
    if beyond := sorted(spec.model_fields_set - CUSTOMER_FIELDS):
        raise Forbidden(
            f"a customer's session may not set {', '.join(beyond)}: its tenant sets those"
        )


def check_transforming(visitor: Visitor, spec: EndpointCreate | EndpointUpdate) -> None:
    """Forbidden when a customer's session without ``transform_endpoints`` sets a
    transformation: a program its tenant runs on every event the endpoint receives."""
    if "transformation" in spec.model_fields_set:
        visitor.require("transform_endpoints")
