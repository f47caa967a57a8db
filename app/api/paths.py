"""Ids in a path: one that cannot be one of ours names nothing, so it is 404 -- the same answer
as a well-formed id that does not exist -- and it never reaches SQL.

(In a body or a query the same id rule answers 422 and names the field; see
``app.core.fields.id_rule``.)
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path

from app.core.errors import NotFound, Unprocessable
from app.core.fields import CUSTOMER_ID_RULE
from app.core.ids import KINDS, describe_id, looks_like


def known_id(prefix: str, value: str) -> str:
    if not looks_like(prefix, value):
        # The value is not echoed: it may be anything, NUL and megabytes included.
        raise NotFound(f"no such {KINDS[prefix]}: the path does not hold {describe_id(prefix)}")
    return value


def _described(prefix: str) -> str:
    return f"The {KINDS[prefix]}'s id ({prefix}_...)."


async def _delivery_id(delivery_id: Annotated[str, Path(description=_described("dlv"))]) -> str:
    return known_id("dlv", delivery_id)


async def _endpoint_id(endpoint_id: Annotated[str, Path(description=_described("ep"))]) -> str:
    return known_id("ep", endpoint_id)


async def _event_id(event_id: Annotated[str, Path(description=_described("evt"))]) -> str:
    return known_id("evt", event_id)


async def _key_id(key_id: Annotated[str, Path(description=_described("key"))]) -> str:
    return known_id("key", key_id)


async def _job_id(job_id: Annotated[str, Path(description=_described("rdv"))]) -> str:
    return known_id("rdv", job_id)


async def _portal_session_id(
    session_id: Annotated[str, Path(description=_described("pts"))],
) -> str:
    return known_id("pts", session_id)


async def _tenant_id(tenant_id: Annotated[str, Path(description=_described("ten"))]) -> str:
    return known_id("ten", tenant_id)


async def _run_id(run_id: Annotated[str, Path(description=_described("run"))]) -> str:
    return known_id("run", run_id)


_CUSTOMER = "The tenant's own id for the customer."


async def _customer_id(customer_id: Annotated[str, Path(description=_CUSTOMER)]) -> str:
    if not CUSTOMER_ID_RULE.matches(customer_id):
        raise NotFound(f"no such customer: a customer's id {CUSTOMER_ID_RULE.allowed}")
    return customer_id


async def _new_customer_id(customer_id: Annotated[str, Path(description=_CUSTOMER)]) -> str:
    # Naming a customer to be made: a broken id is the caller's mistake to fix, not "absent".
    if not CUSTOMER_ID_RULE.matches(customer_id):
        raise Unprocessable(f"a customer's id {CUSTOMER_ID_RULE.allowed}")
    return customer_id


CustomerIdPath = Annotated[str, Depends(_customer_id)]
NewCustomerIdPath = Annotated[str, Depends(_new_customer_id)]
DeliveryIdPath = Annotated[str, Depends(_delivery_id)]
EndpointIdPath = Annotated[str, Depends(_endpoint_id)]
EventIdPath = Annotated[str, Depends(_event_id)]
KeyIdPath = Annotated[str, Depends(_key_id)]
RedriveJobIdPath = Annotated[str, Depends(_job_id)]
PortalSessionIdPath = Annotated[str, Depends(_portal_session_id)]
RunIdPath = Annotated[str, Depends(_run_id)]
TenantIdPath = Annotated[str, Depends(_tenant_id)]
