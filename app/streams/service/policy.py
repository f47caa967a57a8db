"""What an endpoint's ``ordering`` and ``on_dead`` changes do to its streams
(docs/decisions.md, on ordered delivery), in the caller's transaction, before the endpoint's row is
written (streams are locked before the rows of their endpoint)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import Conflict
from app.streams.repository import streams

UNORDERED = "none"


async def change(
    session: AsyncSession,
    endpoint_id: str,
    *,
    ordering: tuple[str, str],
    on_dead: tuple[str, str],
) -> bool:
    """Apply a change of ``ordering`` and ``on_dead`` (each as (before, after)) to the
    endpoint's streams. True when deliveries were handed on or released: the endpoint's
    destination must then be woken after the commit."""
    (was, becomes), (halted_before, halted_after) = ordering, on_dead
    if was != becomes and UNORDERED not in (was, becomes):
        if await streams.busy(session, endpoint_id):
            raise Conflict(
                f"the endpoint still has ordered deliveries under ordering {was!r}: a change "
                f"to {becomes!r} would mix two sets of streams. Wait for them to finish, or set "
                "ordering to 'none' first (which releases them, in no order)"
            )
        return False
    if was != UNORDERED and becomes == UNORDERED:
        await streams.lock(session, await streams.of_endpoint(session, endpoint_id))
        await streams.release(session, endpoint_id)
        return True
    if halted_before == "halt" and halted_after == "skip":
        halted = await streams.of_endpoint(session, endpoint_id, halted_only=True)
        await streams.lock(session, halted)
        return bool(await streams.hand_on(session, halted, skip_halted=True)) or bool(halted)
    return False
