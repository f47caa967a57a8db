"""deploy/compose.yaml against the Compose specification (compose-pydantic's models of it, extra
fields refused: there is no Docker engine here to ask), and held to what Herald needs: the
cron, health checks that fit each role, the migration first, secrets only from the env file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from compose_pydantic import ComposeSpecification
from pydantic import ValidationError

from app.config import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
COMPOSE: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]


def specified(compose: dict[str, Any]) -> dict[str, Any]:
    # Extension fields (x-*) are part of the specification, but the models have no place for
    # them; YAML has already merged them into the services that use them.
    return {key: value for key, value in compose.items() if not key.startswith("x-")}


def test_the_compose_file_follows_the_specification() -> None:
    ComposeSpecification.model_validate(specified(COMPOSE))


def test_the_check_sees_a_compose_file_that_does_not() -> None:
    broken = {**COMPOSE, "services": {**SERVICES, "api": {**SERVICES["api"], "replica": 2}}}
    with pytest.raises(ValidationError):
        ComposeSpecification.model_validate(specified(broken))


def test_it_runs_every_role_with_a_health_check_that_fits_it() -> None:
    assert SERVICES["reconcile"]["command"] == ["herald", "reconcile", "--every", "60s"]
    assert SERVICES["worker"]["healthcheck"]["test"] == ["CMD", "herald", "worker", "--check"]
    assert SERVICES["api"]["healthcheck"]["test"] == ["CMD", "herald", "health"]
    assert (
        SERVICES["api"]["deploy"]["replicas"] == 2 and SERVICES["worker"]["deploy"]["replicas"] == 2
    )
    assert "noeviction" in SERVICES["redis"]["command"]
    assert (
        SERVICES["postgres"]["image"] == "postgres:16" and SERVICES["redis"]["image"] == "redis:7"
    )


def test_the_migration_runs_first_and_once() -> None:
    assert SERVICES["migrate"]["restart"] == "no"
    for name in ("api", "worker"):
        assert SERVICES[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"
        }


def test_secrets_come_from_the_env_file_and_name_real_settings() -> None:
    example = (DEPLOY / "herald.env.example").read_text().splitlines()
    names = {line.split("=", 1)[0] for line in example if "=" in line and not line.startswith("#")}
    known = {f"HERALD_{field.upper()}" for field in Settings.model_fields}
    assert {n for n in names if n.startswith("HERALD_")} <= known
    for service in SERVICES.values():
        inline = service.get("environment", {})
        assert not {"HERALD_DATABASE_URL", "HERALD_ADMIN_API_KEY", "POSTGRES_PASSWORD"} & set(
            inline
        )
