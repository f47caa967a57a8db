from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from fastapi.security import HTTPAuthorizationCredentials
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.api.deps import BEARER, authenticate
from app.api.problems import problem_responses
from app.core import metrics as process_metrics
from app.core.errors import Forbidden, Unauthorized
from app.runtime.resources import ResourcesDep

router = APIRouter(tags=["operations"])


async def _metrics_access(
    resources: ResourcesDep,
    request: Request,
    _declared: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
) -> None:
    if resources.settings.metrics_public:
        return
    principal = await authenticate(resources, request.headers.get("authorization"))
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
    body = await resources.fleet.render() + generate_latest(process_metrics.REPLICAS)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
