"""What a delivery's transformation made of its event, for its page in the console and the
portal: the program it is sent as (its endpoint's when it was accepted) and, run again on the
payload shown, the request -- the same every time (app/programs/transformations.py) -- or
that it was skipped, or why no request could be made."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from app.endpoints.schemas import combined_header_fault
from app.endpoints.service import endpoints


@dataclass(frozen=True)
class TransformedView:
    source: str  # the transformation it is sent as
    outcome: str  # sent | skipped | failed | unshown (the payload is not shown whole)
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)  # those it adds
    body: str | None = None  # pretty-printed; None: the endpoint's own body
    error: str | None = None


async def transformed_view(
    session: AsyncSession,
    tenant_id: str,
    delivery_id: str,
    endpoint_id: str,
    event_type: str,
    payload: bytes | None,
    *,
    max_body_bytes: int,
) -> TransformedView | None:
    """None when the delivery has no transformation. ``payload``: the whole payload the page
    shows, None when it shows only its start (or nothing: expired) -- then the program is
    shown, not run."""
    source = await endpoints.transformation_sent_as(session, endpoint_id, delivery_id)
    if source is None:
        return None
    if payload is None:
        return TransformedView(source, "unshown")
    endpoint = await endpoints.get_any(session, endpoint_id)
    # Endpoints are never deleted, only marked so; a polling one takes no transformation.
    assert endpoint is not None and endpoint.url is not None
    # Imported here: CEL is loaded by the first page that shows a transformation.
    from app.programs import transformations

    try:
        made = transformations.request_of(
            tenant_id,
            source,
            event_type,
            payload,
            max_body_bytes=max_body_bytes,
            header_fault=combined_header_fault,
        )
    except transformations.TransformationFailed as exc:
        return TransformedView(source, "failed", error=str(exc))
    if made.skip:
        return TransformedView(source, "skipped")
    body = None
    if made.body is not None:
        body = json.dumps(json.loads(made.body), indent=2, ensure_ascii=False)
    return TransformedView(source, "sent", made.url_for(endpoint.url), made.headers, body)
