"""Herald's own event types in the catalogue: the operational events a tenant's operational
endpoints subscribe to, each with the JSON Schema of its payload."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from app.api.deps import TenantDep
from app.api.problems import problem_responses
from app.core.errors import Forbidden, NotFound, Unauthorized
from app.signals.schemas import OperationalEventTypeOut
from app.signals.service.types import BY_NAME, OPERATIONAL_TYPES, OperationalType

router = APIRouter(prefix="/v1/operational-event-types", tags=["event types"])


def _out(kind: OperationalType) -> OperationalEventTypeOut:
    return OperationalEventTypeOut(
        name=kind.name,
        description=kind.description,
        schema_=kind.schema(),
        example=kind.example_json(),
    )


@router.get(
    "",
    response_model=list[OperationalEventTypeOut],
    response_model_by_alias=True,
    responses=problem_responses(Unauthorized, Forbidden),
    summary="Herald's own event types (operational events), with their payloads' schemas",
)
async def list_operational_types(_: TenantDep) -> list[OperationalEventTypeOut]:
    return [_out(kind) for kind in OPERATIONAL_TYPES]


@router.get(
    "/{name}",
    response_model=OperationalEventTypeOut,
    response_model_by_alias=True,
    responses=problem_responses(Unauthorized, Forbidden, NotFound),
    summary="One of Herald's own event types, with its payload's schema",
)
async def get_operational_type(
    _: TenantDep, name: Annotated[str, Path(description="herald.endpoint.failing, ...")]
) -> OperationalEventTypeOut:
    kind = BY_NAME.get(name)
    if kind is None:
        raise NotFound(f"{name} is not one of Herald's event types")
    return _out(kind)
