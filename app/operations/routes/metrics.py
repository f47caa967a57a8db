from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.api.deps import ResourcesDep, get_principal
from app.errors import Forbidden, Unauthorized, problem_responses

router = APIRouter(tags=["operations"])


async def _metrics_access(
    resources: ResourcesDep,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> None:
    if resources.settings.metrics_public:
        return
    principal = await get_principal(resources, authorization)
    if not principal.is_admin:
        raise Forbidden("metrics need an admin key (or HERALD_METRICS_PUBLIC=true)")


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text format"},
        **problem_responses(Unauthorized, Forbidden),
    },
    dependencies=[Depends(_metrics_access)],
    summary="Fleet-wide gauges from PostgreSQL (Prometheus)",
)
async def metrics(resources: ResourcesDep) -> Response:
    return Response(await resources.fleet.render(), media_type=CONTENT_TYPE_LATEST)
