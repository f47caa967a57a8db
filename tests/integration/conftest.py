"""Integration tests: Herald in process against real PostgreSQL and Redis.

Every test here starts with empty tables and an empty Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.db import create_sessionmaker, single_statements


@pytest.fixture(autouse=True)
def _starts_clean(clean_slate: None) -> None:
    pass


@pytest.fixture
async def connection(engine: AsyncEngine) -> AsyncIterator[asyncpg.Connection]:
    """A pooled connection's asyncpg driver, as the single-statement hot paths get one."""
    async with single_statements(create_sessionmaker(engine)) as driver:
        yield driver
