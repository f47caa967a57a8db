"""``herald openapi``'s document, exported to ``openapi/openapi.json`` (a test fails on drift).
Built from the app itself, so it lives above it, with the command."""

from __future__ import annotations

from typing import Any

from app.core.config import Settings
from app.main import create_app

# The document does not depend on where the servers are; the lifespan never runs here.
_PLACEHOLDER = Settings(
    database_url="postgresql://herald@localhost/herald", redis_url="redis://localhost:6379/0"
)


def openapi_document() -> dict[str, Any]:
    return create_app(_PLACEHOLDER).openapi()
