"""Trying a transformation on an event before it is saved (``POST
/v1/endpoints/{id}/transformation/test``): what a delivery of that event would send, or why
it would send nothing. Nothing is accepted, stored or sent."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.catalogue.service import event_types
from app.core.errors import Unprocessable
from app.core.payloads import encode_payload
from app.core.scope import Scope
from app.endpoints.schemas import (
    TransformationTrial,
    TransformationTrialOut,
    TrialRequest,
    combined_header_fault,
)
from app.endpoints.service import save_checks
from app.endpoints.service.endpoints import get_endpoint


async def try_transformation(
    session: AsyncSession,
    scope: Scope,
    endpoint_id: str,
    trial: TransformationTrial,
    *,
    max_payload_bytes: int,
) -> TransformationTrialOut:
    endpoint = await get_endpoint(session, scope, endpoint_id)
    if endpoint.url is None:
        raise Unprocessable(
            f"endpoint {endpoint_id} is a polling endpoint: its receiver reads each delivery "
            "as it is, and a polling endpoint takes no transformation"
        )
    source = trial.transformation or endpoint.transformation
    if source is None:
        raise Unprocessable(f"endpoint {endpoint_id} has no transformation: give the one to try")
    save_checks.check_transformation_format(endpoint.payload_format, source)
    payload = trial.payload
    if payload is None:
        payload = await _example(session, scope.tenant_id, trial.event_type)
    encoded = encode_payload(payload, max_payload_bytes)  # as an accept stores it
    # Imported here: the API loads CEL with the first program it checks.
    from app.programs import transformations

    tried = {"event_type": trial.event_type, "payload": payload}
    try:
        made = transformations.request_of(
            scope.tenant_id,
            source,
            trial.event_type,
            encoded,
            max_body_bytes=max_payload_bytes,
            header_fault=combined_header_fault,
        )
    except transformations.TransformationFailed as exc:
        return TransformationTrialOut(
            **tried, outcome="failed", request=None, error=str(exc), bound_steps=None
        )
    if made.skip:
        return TransformationTrialOut(
            **tried, outcome="skipped", request=None, error=None, bound_steps=made.bound
        )
    request = TrialRequest(
        url=made.url_for(endpoint.url),
        headers=made.headers,
        body=json.loads(made.body) if made.body is not None else None,
        body_made=made.body is not None,
    )
    return TransformationTrialOut(
        **tried, outcome="sent", request=request, error=None, bound_steps=made.bound
    )


async def _example(session: AsyncSession, tenant_id: str, event_type: str) -> dict[str, Any]:
    entry = await event_types.find_type(session, tenant_id, event_type)
    if entry is None:
        raise Unprocessable(
            f"event type {event_type} is not in the catalogue: try the transformation on a "
            "type in it, or give the payload"
        )
    example = event_types.example_of(entry)
    if example is None:
        raise Unprocessable(
            f"event type {event_type} has no example payload in the catalogue: give the "
            "payload to try, or the type an example"
        )
    return example
