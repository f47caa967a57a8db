"""The portal page's first request: its link's one-time token for a session token. Not under
/v1: the link is its credential, and the page (Herald's own script) is its only caller."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field

from app.api.deps import SessionDep
from app.api.problems import problem_responses
from app.core.errors import Unauthorized, UnsupportedMediaType
from app.portal.service import sessions

router = APIRouter(prefix="/portal/api", tags=["portal"], include_in_schema=False)


class LinkExchange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    link: Annotated[str, Field(min_length=1, max_length=100)]


class PortalSessionOpened(BaseModel):
    session_token: str
    customer_id: str
    capabilities: list[str]
    expires_at: datetime


@router.post(
    "/session",
    response_model=PortalSessionOpened,
    responses=problem_responses(Unauthorized, UnsupportedMediaType),
)
async def open_portal_session(
    body: LinkExchange, session: SessionDep, response: Response
) -> PortalSessionOpened:
    async with session.begin():
        opened = await sessions.open_link(session, body.link)
    response.headers["Cache-Control"] = "no-store"
    row = opened.session
    return PortalSessionOpened(
        session_token=opened.session_token,
        customer_id=row.customer_id,
        capabilities=row.capabilities,
        expires_at=row.expires_at,
    )
