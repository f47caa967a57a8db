"""What a save of an endpoint is held to beyond its schema, whether it makes the endpoint or
changes it: the other URLs it names pass the SSRF guard, refused in their field's name; the
tenant has room for one more endpoint, and for one more distinct filter."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import Conflict, DestinationRefused, Unprocessable
from app.core.proxies import EgressProxy
from app.endpoints.repository import endpoints
from app.endpoints.schemas.credentials import EgressProxySpec
from app.endpoints.service.destinations import IPNetwork, check_endpoint_url
from app.programs.budget import FILTERS_PER_TENANT
from app.tenants.service import limits


async def room_for_one_more(
    session: AsyncSession, tenant_id: str, customer_id: str | None, held: limits.Limits
) -> None:
    every, of_customer = await endpoints.count_live(session, tenant_id, customer_id)
    if every >= held.max_endpoints:
        raise Conflict(
            f"the tenant has {every:,} endpoints, as many as it may (max_endpoints, "
            "GET /v1/limits): delete one, or ask the operator for more"
        )
    if of_customer >= held.max_endpoints_per_customer:
        whose = f"customer {customer_id} has" if customer_id else "the tenant's own endpoints are"
        raise Conflict(
            f"{whose} {of_customer:,} endpoints, as many as one customer may "
            "(max_endpoints_per_customer, GET /v1/limits): delete one, or ask the operator for "
            "more"
        )


async def room_for_filter(session: AsyncSession, tenant_id: str, source: str) -> None:
    """A tenant's distinct filters all fit its share of each API process's compiled filters
    (FILTERS_PER_TENANT): a tenant with more would make others pay for its compiles."""
    known, distinct = await endpoints.has_filter(session, tenant_id, source)
    if not known and distinct >= FILTERS_PER_TENANT:
        raise Conflict(
            f"the tenant's endpoints have {distinct:,} different filters, as many as it may "
            "have: give this endpoint a filter another already has, or none"
        )


async def check_token_url(url: str, allowlist: Sequence[IPNetwork]) -> None:
    """The token endpoint passes the endpoint's own SSRF guard, its refusal named for it."""
    try:
        await check_endpoint_url(url, allowlist)
    except DestinationRefused as exc:
        raise DestinationRefused(f"oauth2.token_url: {exc.detail}") from None


async def check_egress_proxy(spec: EgressProxySpec, allowlist: Sequence[IPNetwork]) -> None:
    """A tenant's proxy is a destination like any: it passes the SSRF guard (workers vet its
    address again on every connection)."""
    try:
        await check_endpoint_url(EgressProxy.parse(spec.url, trusted=False).url, allowlist)
    except DestinationRefused as exc:
        raise DestinationRefused(f"egress_proxy.url: {exc.detail}") from None


def check_operational(operational: bool, customer_id: str | None) -> None:
    """Herald's own events tell of all the tenant's endpoints and deliveries: they go to the
    tenant's own endpoints, never to a customer's."""
    if operational and customer_id is not None:
        raise Unprocessable(
            "Herald's own events (herald.*) go only to the tenant's own endpoints: an endpoint "
            "of a customer cannot subscribe to them"
        )


def check_transformation_format(payload_format: str, transformation: str | None) -> None:
    """A transformation makes the request's body; a CloudEvents endpoint's body (or its ce-*
    headers) is the CloudEvent, which a transformation would take apart."""
    if transformation is not None and payload_format.startswith("cloudevents"):
        raise Unprocessable(
            f"a transformation makes the request's body, and a {payload_format} endpoint's is "
            "its CloudEvent: use payload_format raw or standard with a transformation"
        )


# What reaching a URL takes: a polling endpoint, which has none, takes none of it.
PUSH_ONLY = (
    "url",
    "headers",
    "secret_headers",
    "oauth2",
    "tls",
    "egress_proxy",
    "webhook_handshake",
    "rate_limit_per_second",
    "max_in_flight",
    "final_statuses",
    "transformation",
)


def check_delivery_fields(delivery: str, spec: BaseModel, *, made: bool) -> None:
    """A push endpoint is made with a URL; a polling one is given none of ``PUSH_ONLY`` --
    sent as null, false or empty, a field sets nothing, and is let be."""
    if delivery == "push":
        if made and getattr(spec, "url", None) is None:
            raise Unprocessable(
                "url: a push endpoint needs the URL Herald sends its deliveries to (or make it "
                'a polling endpoint, "delivery": "poll", whose receiver reads them)'
            )
        return
    given = [name for name in PUSH_ONLY if name in spec.model_fields_set and getattr(spec, name)]
    if given:
        raise Unprocessable(
            f"{', '.join(given)}: a polling endpoint has no URL -- its receiver reads its "
            "deliveries -- so it takes none of what sending to one needs"
        )
