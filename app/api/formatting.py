"""How Herald's pages (the console, the portal) write times, durations and counts: for a person,
in UTC."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any


def seconds(value: float) -> str:
    """A duration in the largest unit that keeps it readable: 0 s, 42 s, 7 min, 3.5 h, 2 d."""
    if math.isinf(value):
        return "never"
    if value < 60:
        return f"{value:.0f} s"
    if value < 3600:
        return f"{value / 60:.0f} min"
    if value < 86400:
        return f"{value / 3600:.1f} h"
    return f"{value / 86400:.1f} d"


def when(value: datetime | None) -> str:
    return "—" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def counts(value: dict[str, Any] | None) -> str:
    """A reconcile run's counts, the non-zero ones: ``enqueued 3, repaired 1``."""
    shown = [f"{name.replace('_', ' ')} {n}" for name, n in (value or {}).items() if n]
    return ", ".join(shown) or "nothing to do"


def size(value: int) -> str:
    """Bytes as a person reads them: 842 B, 16.0 KiB, 1.5 MiB."""
    if value < 1024:
        return f"{value} B"
    if value < 1024 * 1024:
        return f"{value / 1024:.1f} KiB"
    return f"{value / (1024 * 1024):.1f} MiB"


def as_json(value: Any) -> str:
    """A value as JSON, to be read (the template escapes it as any text): ``"a"``, ``null``."""
    return json.dumps(value, ensure_ascii=False)


FILTERS = {"seconds": seconds, "when": when, "counts": counts, "size": size, "as_json": as_json}
