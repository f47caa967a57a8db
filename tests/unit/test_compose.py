"""deploy/compose.yaml against the Compose specification (compose-pydantic's models of it, extra
fields refused: there is no Docker engine here to ask), and held to what Herald needs: the
cron, health checks that fit each role, the migration first, secrets only from the env file, a
worker's stop timeout by the rule docs/operations.md states."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from compose_pydantic import ComposeSpecification
from pydantic import ValidationError

from app.core.config import Settings
from tests.fixtures.worker_stop import settings_from, worker_stop_seconds

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
COMPOSE: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]


# Compose durations: "105s", "1m45s", "1h".
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 0.000001}


def seconds(duration: str) -> float:
    parts = _DURATION_PART.findall(duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def env_file(name: str) -> dict[str, str]:
    lines = (DEPLOY / name).read_text().splitlines()
    pairs = [line.split("=", 1) for line in lines if "=" in line and not line.startswith("#")]
    return {key.strip(): value.strip() for key, value in pairs}


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


def test_a_worker_gets_the_readmes_time_to_stop_at_the_settings_compose_gives_it() -> None:
    worker = SERVICES["worker"]
    # What the worker container is started with: the env file (its template here), then the
    # service's own environment.
    assert worker["env_file"] == ["herald.env"]
    settings = settings_from({**env_file("herald.env.example"), **worker["environment"]})
    assert seconds(worker["stop_grace_period"]) >= worker_stop_seconds(settings)


def test_secrets_come_from_the_env_file_and_name_real_settings() -> None:
    names = set(env_file("herald.env.example"))
    known = {f"HERALD_{field.upper()}" for field in Settings.model_fields}
    assert {n for n in names if n.startswith("HERALD_")} <= known
    for service in SERVICES.values():
        inline = service.get("environment", {})
        secret = {
            "HERALD_DATABASE_URL",
            "HERALD_ADMIN_API_KEY",
            "HERALD_SECRET_KEYS",
            "POSTGRES_PASSWORD",
        }
        assert not secret & set(inline)
    assert "HERALD_SECRET_KEYS" in names
