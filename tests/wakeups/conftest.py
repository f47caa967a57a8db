"""Tests of the wake-up engine, whatever engine the rest of the suite runs: the API of these
tests arms destinations instead of queueing jobs (its workers are started with
HERALD_DELIVERY_ENGINE=wakeups by each test)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from fastapi import FastAPI

from app.config import Settings
from app.main import create_app
from tests.support import Stack, make_settings


@pytest.fixture(scope="session")
def settings(stack: Stack) -> Settings:
    return make_settings(stack, delivery_engine="wakeups")


@pytest.fixture(scope="session")
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application
