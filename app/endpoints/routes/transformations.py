"""An endpoint's transformation, tried before it is saved (saving it is a field of the
endpoint: POST and PATCH /v1/endpoints)."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import ManageScopeDep, SessionDep, VisitorDep
from app.api.paths import EndpointIdPath
from app.api.problems import problem_responses
from app.core.errors import (
    Forbidden,
    NotFound,
    Unauthorized,
    Unprocessable,
    UnsupportedMediaType,
)
from app.endpoints.schemas import TransformationTrial, TransformationTrialOut
from app.endpoints.service import transformation_trials
from app.runtime.resources import ResourcesDep

router = APIRouter(prefix="/v1/endpoints", tags=["endpoints"])


@router.post(
    "/{endpoint_id}/transformation/test",
    response_model=TransformationTrialOut,
    responses=problem_responses(
        Unauthorized, Forbidden, NotFound, Unprocessable, UnsupportedMediaType
    ),
    summary="Try a transformation on an event: what a delivery would send; nothing is sent",
)
async def try_transformation(
    scope: ManageScopeDep,
    visitor: VisitorDep,
    endpoint_id: EndpointIdPath,
    trial: TransformationTrial,
    session: SessionDep,
    resources: ResourcesDep,
) -> TransformationTrialOut:
    visitor.require("transform_endpoints")
    async with session.begin():
        return await transformation_trials.try_transformation(
            session,
            scope,
            endpoint_id,
            trial,
            max_payload_bytes=resources.settings.max_payload_bytes,
        )
