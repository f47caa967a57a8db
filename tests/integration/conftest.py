"""Integration tests: Herald in process against real PostgreSQL and Redis.

Every test here starts with empty tables and an empty Redis."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _starts_clean(clean_slate: None) -> None:
    pass
