from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from app.core.fields import ONE_LINE_RULE, EndpointId, TenantId, TextRule

# RFC 3986's characters (unreserved, reserved and "%"): what a URI-reference is written with.
URI_REFERENCE_RULE = TextRule(
    r"^[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+$",
    "must be a URI reference (such as https://billing.example.com or /billing): letters, digits "
    "and the characters URIs use, no spaces",
)
_SOURCE = (
    "The CloudEvents `source` of this tenant's events (a URI reference, such as "
    "`https://billing.example.com`); null: `urn:herald:tenant:<tenant id>`."
)


def _not_herald_s(source: str) -> str:
    if source.lower().startswith("urn:herald:"):
        raise PydanticCustomError(
            "reserved_source", "urn:herald: is Herald's own: name a source of yours"
        )
    return source


# Herald's default (urn:herald:tenant:<id>) is reserved: no tenant can take another's.
CloudEventsSource = Annotated[
    str, Field(min_length=1, max_length=255), URI_REFERENCE_RULE, AfterValidator(_not_herald_s)
]


# Failures in a row that make an endpoint "failing" unless the tenant says otherwise: the
# trigger of migration 0045 applies the same default.
FAILING_AFTER_DEFAULT = 5
_FAILING_AFTER = (
    "Failures in a row after which an endpoint is failing (the operational event "
    "herald.endpoint.failing; herald.endpoint.recovered follows its next success). "
    f"null: {FAILING_AFTER_DEFAULT}."
)


def _or_default(value: int | None) -> int:
    return FAILING_AFTER_DEFAULT if value is None else value


_RETENTION = (
    "Days a finished delivery stays visible (with its attempts and timeline) after it "
    "finished; at most the operator's HERALD_RETENTION_DAYS. null: the operator's. Live "
    "deliveries and a halted stream's dead head always stay."
)
_PAYLOAD_RETENTION = (
    "Days an event's payload is kept after it was accepted, at most `retention_days`; past "
    "them it is dropped from storage, shown as expired, and no longer redriven, while the "
    "deliveries' records stay. Applies to events accepted from the change on. null: "
    "`retention_days` days, or as long as the records when that is null too."
)


class TenantSettingsOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    created_at: datetime
    cloudevents_source: str | None = Field(description=_SOURCE)
    failing_after: Annotated[int, BeforeValidator(_or_default)] = Field(description=_FAILING_AFTER)
    retention_days: int | None = Field(description=_RETENTION)
    payload_retention_days: int | None = Field(description=_PAYLOAD_RETENTION)


class TenantSettingsChange(BaseModel):
    """Fields to change; fields left out stay as they are."""

    model_config = ConfigDict(extra="forbid")

    cloudevents_source: CloudEventsSource | None = Field(default=None, description=_SOURCE)
    failing_after: int | None = Field(default=None, ge=1, le=1000, description=_FAILING_AFTER)
    retention_days: int | None = Field(default=None, ge=1, le=3660, description=_RETENTION)
    payload_retention_days: int | None = Field(
        default=None, ge=1, le=3660, description=_PAYLOAD_RETENTION
    )


class TenantCreate(BaseModel):
    name: Annotated[str, Field(min_length=1, max_length=200), ONE_LINE_RULE]


class TenantCreated(BaseModel):
    id: str
    name: str
    created_at: datetime
    api_key: str = Field(description="The tenant's first API key. Shown once; store it now.")


class TenantOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    created_at: datetime


KeyLabel = Annotated[str, Field(min_length=1, max_length=200), ONE_LINE_RULE]


class ApiKeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: KeyLabel | None = Field(default=None, description="What the key is for.")
    tenant_id: TenantId | None = Field(
        default=None, description="Admins only: the tenant the key acts for."
    )
    endpoint_id: EndpointId | None = Field(
        default=None,
        description="A key for this one polling endpoint: it polls the endpoint and "
        "acknowledges what it read, and every other route refuses it -- the credential to give "
        "the endpoint's receiver.",
    )


class ApiKeyOut(BaseModel):
    """A key as it may be shown: never its secret, which is shown once when it is made."""

    model_config = ConfigDict(from_attributes=True, populate_by_name=True)

    id: str
    tenant_id: str | None = Field(description="null for an admin key")
    endpoint_id: str | None = Field(
        default=None, description="A key for one polling endpoint: the endpoint's id."
    )
    prefix: str = Field(
        validation_alias="display_prefix", description="The key's first characters."
    )
    label: str | None
    created_at: datetime
    last_used_at: datetime | None = Field(
        description="When a request last authenticated with it, to within a minute plus the key "
        "cache's time (HERALD_API_KEY_CACHE_SECONDS)."
    )
    revoked_at: datetime | None


class ApiKeyCreated(ApiKeyOut):
    key: str = Field(description="The key itself. Shown once; store it now.")


CustomerName = Annotated[str, Field(min_length=1, max_length=200), ONE_LINE_RULE]


class CustomerPut(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"name": "Acme"}]})

    name: CustomerName | None = Field(
        default=None, description="What the tenant calls the customer; shown in its portal."
    )


class CustomerOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str = Field(description="The tenant's own id for the customer.")
    name: str | None
    created_at: datetime
    updated_at: datetime


_LIMIT_DOC = "Null: the default every tenant gets (HERALD_TENANT_*)."


class LimitsChange(BaseModel):
    """The limits to change; those left out stay as they are, null returns one to the
    default."""

    model_config = ConfigDict(extra="forbid")

    max_endpoints: int | None = Field(default=None, ge=1, le=10_000_000, description=_LIMIT_DOC)
    max_endpoints_per_customer: int | None = Field(
        default=None, ge=1, le=100_000, description=_LIMIT_DOC
    )
    max_fanout: int | None = Field(default=None, ge=1, le=100_000, description=_LIMIT_DOC)
    accept_rate: float | None = Field(
        default=None, ge=0, le=1_000_000, description=_LIMIT_DOC + " 0: no limit."
    )
    delivery_rate: float | None = Field(
        default=None, ge=0, le=1_000_000, description=_LIMIT_DOC + " 0: no limit."
    )


class LimitsOut(BaseModel):
    tenant_id: str
    max_endpoints: int = Field(description="Endpoints the tenant may have, all customers' too.")
    max_endpoints_per_customer: int = Field(
        description="Endpoints one customer may have; the tenant's own (of no customer) count "
        "as one customer's."
    )
    max_fanout: int = Field(description="Deliveries one event may make.")
    accept_rate: float = Field(
        description="Intents (deliveries, batch items, events) accepted a second, across every "
        "API process; past it, 429 with Retry-After and nothing stored. 0: no limit."
    )
    delivery_rate: float = Field(
        description="Attempts the tenant's deliveries may start a second, across every worker; "
        "past it they wait by policy (status `throttled`, saying so). 0: no limit."
    )
    set_by_operator: list[str] = Field(
        description="The limits the operator set for this tenant; the others are the defaults."
    )
