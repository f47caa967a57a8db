from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.deps import ActorDep, SessionDep, TenantDep
from app.api.pagination import Cursor, Limit, Page, decode_cursor, page_of
from app.api.paths import CustomerIdPath, NewCustomerIdPath
from app.api.problems import problem_responses
from app.core.errors import Forbidden, NotFound, Unauthorized, UnsupportedMediaType
from app.core.fields import CUSTOMER_ID_RULE
from app.core.scope import Scope
from app.endpoints.service import endpoints
from app.tenants.schemas import CustomerOut, CustomerPut
from app.tenants.service import customers

router = APIRouter(prefix="/v1/customers", tags=["customers"])
_AUTH = (Unauthorized, Forbidden)


@router.put(
    "/{customer_id}",
    response_model=CustomerOut,
    responses={
        201: {"model": CustomerOut, "description": "Made (or brought back after deletion)"},
        **problem_responses(*_AUTH, UnsupportedMediaType),
    },
    summary="Create a customer under the tenant's own id for it, or rename it",
)
async def put_customer(
    tenant_id: TenantDep,
    by: ActorDep,
    customer_id: NewCustomerIdPath,
    body: CustomerPut,
    session: SessionDep,
    response: Response,
) -> CustomerOut:
    async with session.begin():
        customer, made = await customers.put_customer(
            session, tenant_id, customer_id, body.name, by=by
        )
    if made:
        response.status_code = 201
        response.headers["Location"] = f"/v1/customers/{customer.id}"
    return CustomerOut.model_validate(customer)


@router.get(
    "",
    response_model=Page[CustomerOut],
    responses=problem_responses(*_AUTH),
    summary="List customers by id",
)
async def list_customers(
    tenant_id: TenantDep, session: SessionDep, limit: Limit = 50, cursor: Cursor = None
) -> Page[CustomerOut]:
    after = decode_cursor(cursor, CUSTOMER_ID_RULE.matches)
    async with session.begin():
        rows = await customers.list_customers(session, tenant_id, limit=limit + 1, after_id=after)
    return page_of(rows, limit, CustomerOut.model_validate, lambda item: item.id)


@router.get(
    "/{customer_id}",
    response_model=CustomerOut,
    responses=problem_responses(*_AUTH, NotFound),
)
async def get_customer(
    tenant_id: TenantDep, customer_id: CustomerIdPath, session: SessionDep
) -> CustomerOut:
    async with session.begin():
        customer = await customers.get_customer(session, tenant_id, customer_id)
    return CustomerOut.model_validate(customer)


@router.delete(
    "/{customer_id}",
    status_code=204,
    responses=problem_responses(*_AUTH, NotFound),
    summary="Delete a customer and its endpoints; their delivery history is kept",
)
async def delete_customer(
    tenant_id: TenantDep, by: ActorDep, customer_id: CustomerIdPath, session: SessionDep
) -> Response:
    async with session.begin():
        await endpoints.delete_customer(session, Scope(tenant_id, customer_id), by=by)
    return Response(status_code=204)
