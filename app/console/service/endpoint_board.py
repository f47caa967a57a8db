"""The endpoints page's rows: each endpoint with how it fared in the last hour and what its flow
control holds now. One stats query per endpoint (the attempts index, the last hour only) and
one Redis script call: a page of 50 endpoints is 100 round trips, bounded by the page."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.config import Settings
from app.core.redis_clients import FlowRedis
from app.core.scope import Scope
from app.delivery.service.endpoint_stats import WindowCounts, last_hour
from app.endpoints.schemas import current_pause
from app.endpoints.schemas.tls import shown
from app.endpoints.service.endpoints import FlowLimits, get_live, list_endpoints
from app.flow.service.flow_state import flow_snapshot
from app.models import Endpoint


@dataclass(frozen=True)
class BoardRow:
    endpoint: Endpoint
    last_hour: WindowCounts
    paused_until: datetime | None  # a pause in force, and why
    pause_reason: str | None
    in_flight: int | None  # now, as Redis counts it; None when Redis cannot say
    max_in_flight: int  # the ceiling in force (the endpoint's, else the default; 0: none)
    rate_limit: float  # starts a second in force (0: none)
    # The TLS material as the API shows it (a fallback only while it is one); None: none.
    tls: dict[str, Any] | None = None


async def endpoint_board(
    session: AsyncSession,
    redis: FlowRedis,
    settings: Settings,
    tenant_id: str,
    *,
    limit: int,
    before_id: str | None,
    endpoint_id: str | None = None,
) -> list[BoardRow]:
    """A page of the tenant's endpoints, newest first; or the one ``endpoint_id`` names (an
    id a page links to), none if it is not the tenant's."""
    scope = Scope(tenant_id)
    if endpoint_id is not None:
        one = await get_live(session, scope, endpoint_id)
        listed = [] if one is None else [one]
    else:
        listed = await list_endpoints(session, scope, limit=limit, before_id=before_id)
    rows = []
    for endpoint in listed:
        ceiling = endpoint.max_in_flight or settings.default_max_in_flight
        flow = await flow_snapshot(redis, endpoint.id, ceiling)
        rows.append(
            BoardRow(
                endpoint=endpoint,
                last_hour=await last_hour(session, endpoint.id),
                **current_pause(endpoint),
                in_flight=None if flow is None else flow.in_flight,
                max_in_flight=ceiling,
                rate_limit=FlowLimits(
                    endpoint.tenant_id,
                    endpoint.rate_limit_per_second,
                    endpoint.max_in_flight,
                    0.0,
                    endpoint.breaker_trips,
                    None
                    if endpoint.webhook_allowed_rate is None
                    else endpoint.webhook_allowed_rate / 60,
                ).rate(settings.default_rate_limit_per_second),
                tls=shown(endpoint.tls, endpoint.previous_tls, endpoint.previous_tls_expires_at),
            )
        )
    return rows
