"""A claimed delivery as its endpoint's transformation makes it (app/programs/transformations.py):
the request to send -- its body, its extra headers, its URL -- or the ending it gets instead
when the transformation says not to send it (skipped) or makes no request of its event.

The transformation is the version the delivery's endpoint had when it was accepted (the claim
reads it), and a transformation gives the same request for the same event: every attempt of a
delivery, and every redrive, sends the same bytes under the same Idempotency-Key.
"""

from __future__ import annotations

import dataclasses

import structlog

from app.core.states import SKIPPED_BY_TRANSFORMATION
from app.endpoints.schemas import combined_header_fault
from app.engine.repository.delivery_leases import ClaimedDelivery
from app.engine.service import outcomes

log = structlog.get_logger("herald.delivery")

FAILED = "transformation_failed"  # a dead delivery's reason, before the words


def transformed(
    claimed: ClaimedDelivery, max_body_bytes: int
) -> ClaimedDelivery | outcomes.Transition:
    """``claimed`` with the request its transformation makes, or how the delivery ends without
    a request: cancelled when the transformation skips it, dead when it makes none (which the
    same program would never make of the same event)."""
    if claimed.transformation is None:
        return claimed
    # Imported here: CEL's runtime is a 50 MB library, loaded by a worker only once one of
    # its deliveries has a transformation.
    from app.programs import transformations

    try:
        made = transformations.request_of(
            claimed.tenant_id,
            claimed.transformation,
            claimed.event_type,
            claimed.payload,
            max_body_bytes=max_body_bytes,
            header_fault=combined_header_fault,
        )
    except transformations.TransformationFailed as exc:
        return _failed(claimed, str(exc))
    if made.skip:
        return outcomes.Transition.cancelled(SKIPPED_BY_TRANSFORMATION)
    assert claimed.url is not None  # a polling endpoint takes no transformation
    return dataclasses.replace(claimed, url=made.url_for(claimed.url), transformed=made)


def _failed(claimed: ClaimedDelivery, why: str) -> outcomes.Transition:
    # Once per delivery (it is dead at once). The why stays in the delivery's reason, for its
    # tenant: it may quote a value of the event (a field named by the payload), so the log
    # says only that it failed.
    log.warning(
        "delivery.transformation_failed", delivery_id=claimed.id, endpoint_id=claimed.endpoint_id
    )
    return outcomes.Transition.dead(f"{FAILED}: {why}")
