"""Committed artefacts match the code: the OpenAPI document and the migrations."""

from __future__ import annotations

import json
import re
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.ext.asyncio import AsyncEngine

from app.cli.openapi import openapi_document
from app.core.db import Base
from app.delivery.schemas import DeliveryIntent, EventIntent
from app.endpoints.schemas import EndpointCreate
from app.models import RETIRED_TABLES  # (importing app.models registers the tables)

# The day partitions of the tables that grow with traffic, and the tables from before (each
# now its table's first partition), and the payload classes a day is split into.
PARTITION = re.compile(r"[a-z_]+_(\d{8}(_p\d+)?|legacy)")
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


def test_every_v1_route_declares_the_bearer_scheme() -> None:
    document = openapi_document()
    scheme = document["components"]["securitySchemes"]["apiKey"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    undeclared = [
        (method, path)
        for path, operations in document["paths"].items()
        if path.startswith("/v1/")
        for method, operation in operations.items()
        if operation.get("security") != [{"apiKey": []}]
    ]
    assert undeclared == []


def test_the_main_request_bodies_carry_an_example_that_validates() -> None:
    schemas = openapi_document()["components"]["schemas"]
    for name, model in (
        ("DeliveryIntent", DeliveryIntent),
        ("EventIntent", EventIntent),
        ("EndpointCreate", EndpointCreate),
    ):
        [example] = schemas[name]["examples"]
        model.model_validate(example)  # the documented example is a valid request


async def test_migrations_build_exactly_the_models(engine: AsyncEngine) -> None:
    async with engine.connect() as connection:
        differences = await connection.run_sync(
            lambda sync: compare_metadata(
                MigrationContext.configure(
                    sync,
                    opts={
                        "compare_type": True,
                        # The suite's own audit table (conftest) is not part of the schema, a
                        # retired table is kept for the release before with no model, and a
                        # partition is its parent's (which the models name).
                        "include_name": lambda name, kind, _: (
                            not (
                                (name or "").startswith("test_")
                                or name in RETIRED_TABLES
                                or (kind == "table" and PARTITION.fullmatch(name or ""))
                            )
                        ),
                    },
                ),
                Base.metadata,
            )
        )
    assert differences == [], "models and migrations disagree: add a migration"
