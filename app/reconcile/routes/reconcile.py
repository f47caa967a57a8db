from __future__ import annotations

from fastapi import APIRouter, Body, Response

from app.api.deps import AdminDep, SessionDep
from app.api.pagination import Cursor, Limit, Page, decode_id_cursor, page_of
from app.api.paths import RunIdPath
from app.api.problems import problem_responses
from app.core.errors import (
    Forbidden,
    NotFound,
    ServiceUnavailable,
    Unauthorized,
    UnsupportedMediaType,
)
from app.reconcile.repository import reconcile_runs
from app.reconcile.schemas import ReconcileAccepted, ReconcileRequest, ReconcileRunOut
from app.reconcile.service import reconcile
from app.runtime.resources import ResourcesDep

router = APIRouter(prefix="/v1/reconcile", tags=["reconcile"])
_AUTH = (Unauthorized, Forbidden)


@router.post(
    "",
    status_code=202,
    response_model=ReconcileAccepted,
    responses=problem_responses(*_AUTH, UnsupportedMediaType, ServiceUnavailable),
    summary="Start a reconcile run (admin; for cron). Returns at once.",
)
async def start_reconcile(
    _admin: AdminDep,
    resources: ResourcesDep,
    response: Response,
    body: ReconcileRequest | None = Body(default=None),  # noqa: B008
) -> ReconcileAccepted:
    run = await reconcile.start_reconcile(
        resources.sessionmaker,
        resources.queue,
        resources.settings,
        trigger=body.trigger if body else "api",
    )
    response.headers["Location"] = f"/v1/reconcile/runs/{run.id}"
    return ReconcileAccepted(run_id=run.id, status=run.status)


@router.get(
    "/runs",
    response_model=Page[ReconcileRunOut],
    responses=problem_responses(*_AUTH),
    summary="Reconcile runs, newest first (admin)",
)
async def list_runs(
    _admin: AdminDep, session: SessionDep, limit: Limit = 20, cursor: Cursor = None
) -> Page[ReconcileRunOut]:
    async with session.begin():
        rows = await reconcile_runs.list_page(
            session, limit=limit + 1, before_id=decode_id_cursor(cursor, "run")
        )
    return page_of(rows, limit, ReconcileRunOut.model_validate, lambda item: item.run_id)


@router.get(
    "/runs/{run_id}",
    response_model=ReconcileRunOut,
    responses=problem_responses(*_AUTH, NotFound),
    summary="One reconcile run: status, counts per category, error (admin)",
)
async def get_run(_admin: AdminDep, run_id: RunIdPath, session: SessionDep) -> ReconcileRunOut:
    async with session.begin():
        run = await reconcile_runs.get(session, run_id)
    if run is None:
        raise NotFound(f"reconcile run {run_id} not found")
    return ReconcileRunOut.model_validate(run)
