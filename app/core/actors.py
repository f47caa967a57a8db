"""Who changed something, as an audit record names them: an API key, a portal session, the
console (signed in with a key), or the `herald` command on the database's own machine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ActorKind = Literal["api_key", "admin", "portal_session", "console", "cli"]


@dataclass(frozen=True)
class Actor:
    kind: ActorKind
    # The API key's id (key_...: for api_key, admin, console), the portal session's (pts_...);
    # None for the configured admin key, which no database holds, and for the CLI.
    id: str | None = None


CLI = Actor("cli")
