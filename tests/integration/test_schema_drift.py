"""Committed artefacts match the code: the OpenAPI document and the migrations."""

from __future__ import annotations

import json
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.ext.asyncio import AsyncEngine

import app.models  # noqa: F401  (registers the tables)
from app.db import Base
from app.openapi import openapi_document

OPENAPI_FILE = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


def test_committed_openapi_matches_the_app() -> None:
    committed = json.loads(OPENAPI_FILE.read_text())
    assert committed == openapi_document(), "run `make openapi` and commit openapi/openapi.json"


def test_every_error_route_documents_problem_json() -> None:
    for path, operations in openapi_document()["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")):
                    assert "application/problem+json" in response.get("content", {}), (
                        method,
                        path,
                        status,
                    )


async def test_migrations_build_exactly_the_models(engine: AsyncEngine) -> None:
    async with engine.connect() as connection:
        differences = await connection.run_sync(
            lambda sync: compare_metadata(
                MigrationContext.configure(
                    sync,
                    opts={
                        "compare_type": True,
                        # The suite's own audit table (conftest) is not part of the schema.
                        "include_name": lambda name, kind, _: not (name or "").startswith("test_"),
                    },
                ),
                Base.metadata,
            )
        )
    assert differences == [], "models and migrations disagree: add a migration"
