"""Recording a change in the caller's transaction, and reading the trail. What a record holds
of its subject is the caller's to choose, and is always a view with no secret's value in it (an
endpoint as the API shows it, a key without the key); of a change, only the fields that
changed are kept, as they were and as they became."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.repository import audit_records

# The API's and the console's reads of the trail.
from app.audit.repository.audit_records import list_page as list_page
from app.core.actors import Actor
from app.core.fields import TextRule
from app.core.ids import new_id

View = dict[str, Any]

# What a record is about, as a filter names it: an id, a customer's id or an event type's name
# (the characters of each).
SUBJECT_RULE = TextRule(
    r"^[A-Za-z0-9][A-Za-z0-9_.:@+\-/]{0,254}$",
    "must be what was changed: an endpoint's or a key's id, a customer's id or an event "
    "type's name",
)


def changed(before: View, after: View) -> tuple[View, View]:
    """The fields whose values differ, as they were and as they became."""
    names = [name for name in {**before, **after} if before.get(name) != after.get(name)]
    return {n: before.get(n) for n in names}, {n: after.get(n) for n in names}


async def record(
    session: AsyncSession,
    tenant_id: str,
    by: Actor,
    action: str,
    subject_id: str | None,
    *,
    before: View | None = None,
    after: View | None = None,
) -> None:
    """One change, in the caller's transaction. A change with both views keeps only what
    differs between them, and is not recorded when nothing does."""
    if before is not None and after is not None:
        before, after = changed(before, after)
        if not before:
            return
    await audit_records.insert_record(
        session,
        id=new_id("aud"),
        tenant_id=tenant_id,
        actor_kind=by.kind,
        actor_id=by.id,
        action=action,
        subject_id=subject_id,
        before=before,
        after=after,
    )
