"""The audit trail over HTTP: a tenant's configuration changes, newest first."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import SessionDep, TenantDep
from app.api.pagination import Cursor, Limit, Page, decode_cursor, page_of
from app.api.problems import problem_responses
from app.audit.schemas import AuditRecordOut
from app.audit.service import audit
from app.core.errors import Forbidden, Unauthorized
from app.core.fields import TextRule
from app.core.ids import looks_like

router = APIRouter(prefix="/v1/audit-records", tags=["audit"])

AuditSubject = Annotated[str, audit.SUBJECT_RULE]
# An action's name: a kind of subject and what was done to it.
AuditAction = Annotated[
    str, TextRule(r"^[a-z_]{1,40}\.[a-z_]{1,40}$", "must be an action, such as endpoint.updated")
]


@router.get(
    "",
    response_model=Page[AuditRecordOut],
    responses=problem_responses(Unauthorized, Forbidden),
    summary="The audit trail: who changed what, before and after, newest first",
)
async def list_audit_records(
    tenant_id: TenantDep,
    session: SessionDep,
    subject: Annotated[
        AuditSubject | None,
        Query(
            description="Only the changes to this: an endpoint's or a key's id, a customer's, "
            "an event type's name.",
        ),
    ] = None,
    action: Annotated[
        AuditAction | None, Query(description="Only this kind of change (endpoint.updated).")
    ] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Page[AuditRecordOut]:
    before_id = decode_cursor(cursor, lambda position: looks_like("aud", position))
    async with session.begin():
        rows = await audit.list_page(
            session,
            tenant_id,
            limit=limit + 1,
            before_id=before_id,
            subject_id=subject,
            action=action,
        )
    return page_of(rows, limit, AuditRecordOut.model_validate, lambda item: item.id)
