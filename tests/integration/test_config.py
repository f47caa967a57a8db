"""Settings: their defaults, comma lists, and start-up errors that name the setting."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import pytest

from app.core.config import DEFAULT_RETRY_SCHEDULE, Settings, SettingsError, load_settings


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("HERALD_"):
            monkeypatch.delenv(name)


def test_defaults() -> None:
    settings = load_settings()
    assert settings.host == "127.0.0.1" and settings.port == 8000
    assert settings.max_payload_bytes == 262_144
    assert settings.destination_allowlist == ()
    assert settings.retry_schedule == DEFAULT_RETRY_SCHEDULE
    assert settings.attempts_limit == len(DEFAULT_RETRY_SCHEDULE) + 1
    assert settings.request_timeout_seconds == 15
    assert settings.reconcile_interval_seconds == 60
    assert settings.idempotency_key_ttl_hours == 24
    assert str(settings.data_dir) == ".herald"


def test_comma_separated_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERALD_RETRY_SCHEDULE", "0.5, 2,10")
    monkeypatch.setenv("HERALD_DESTINATION_ALLOWLIST", "10.0.0.0/8, ::1")
    settings = load_settings()
    assert settings.retry_schedule == (0.5, 2.0, 10.0)
    assert settings.attempts_limit == 4
    assert settings.destination_allowlist == (
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("::1/128"),
    )


def test_explicit_max_attempts_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERALD_MAX_ATTEMPTS", "3")
    assert load_settings().attempts_limit == 3


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HERALD_PORT", "0"),
        ("HERALD_PORT", "http"),
        ("HERALD_RETRY_SCHEDULE", "5,soon"),
        ("HERALD_RETRY_SCHEDULE", "-1"),
        ("HERALD_RETRY_SCHEDULE", ""),
        ("HERALD_DESTINATION_ALLOWLIST", "10.0.0.0/33"),
        ("HERALD_DESTINATION_ALLOWLIST", "intranet"),
        ("HERALD_MAX_PAYLOAD_BYTES", "-5"),
        ("HERALD_MAX_ATTEMPTS", "0"),
        ("HERALD_REQUEST_TIMEOUT_SECONDS", "0"),
        ("HERALD_RECONCILE_INTERVAL_SECONDS", "-1"),
        ("HERALD_IDEMPOTENCY_KEY_TTL_HOURS", "0"),
        ("HERALD_ADMIN_API_KEY", "short"),
        ("HERALD_DATABASE_URL", "mysql://x"),
        ("HERALD_REDIS_URL", "http://x"),
        ("HERALD_FAULT", "api.somewhere"),
    ],
)
def test_invalid_setting_fails_with_its_name(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=name):
        load_settings()


def test_secrets_stay_out_of_the_settings_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERALD_ADMIN_API_KEY", "super-secret-admin-key-123")
    monkeypatch.setenv("HERALD_DATABASE_URL", "postgresql://u:pw-in-url@db/herald")
    shown = repr(load_settings())
    assert "super-secret-admin-key-123" not in shown
    assert "pw-in-url" not in shown


def test_a_lease_barely_longer_than_the_request_timeout_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One second of spare lease: one second of event-loop lag would allow two concurrent sends.
    monkeypatch.setenv("HERALD_REQUEST_TIMEOUT_SECONDS", "15")
    monkeypatch.setenv("HERALD_LEASE_SECONDS", "16")
    with pytest.raises(SettingsError) as refused:
        load_settings()
    message = str(refused.value)
    assert "HERALD_LEASE_SECONDS must be at least twice HERALD_REQUEST_TIMEOUT_SECONDS" in message
    assert "(at least 30 s here)" in message
    monkeypatch.setenv("HERALD_LEASE_SECONDS", "30")
    assert load_settings().lease_duration == 30


@pytest.mark.parametrize("request_timeout", [0.5, 15, 30, 100, 300])
def test_the_default_lease_leaves_room_beyond_the_request(
    monkeypatch: pytest.MonkeyPatch, request_timeout: float
) -> None:
    monkeypatch.setenv("HERALD_REQUEST_TIMEOUT_SECONDS", str(request_timeout))
    settings = load_settings()
    assert settings.lease_duration >= 2 * request_timeout
    assert settings.lease_duration >= request_timeout + 30
    # Sending needs the whole request and part of the spare time, but not all of it.
    assert request_timeout < settings.lease_left_to_send < settings.lease_duration


def _env_example() -> tuple[dict[str, str], set[str]]:
    """.env.example's settings: those it sets (to their defaults) and those shown commented out
    (no fixed default, or an example value)."""
    example = Path(__file__).resolve().parents[2] / ".env.example"
    stated, mentioned = {}, set()
    for line in example.read_text().splitlines():
        match = re.fullmatch(r"(#\s*)?HERALD_([A-Z0-9_]+)=(.*)", line.strip())
        if match is None:
            continue
        mentioned.add(match[2].lower())
        if match[1] is None:
            stated[f"HERALD_{match[2]}"] = match[3]
    return stated, mentioned


def test_a_setting_herald_does_not_have_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = load_settings().model_dump()
    # A HERALD_ variable no setting reads changes nothing and stops nothing
    # (docs/configuration.md says so), so an environment file written for another version starts.
    monkeypatch.setenv("HERALD_DELIVERY_ENGINE", "jobs")
    assert load_settings().model_dump() == defaults


def test_env_example_lists_every_setting_with_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    stated, mentioned = _env_example()
    assert mentioned == set(Settings.model_fields), "add or remove settings in .env.example"
    defaults = load_settings().model_dump()
    for name, value in stated.items():
        monkeypatch.setenv(name, value)
    assert load_settings().model_dump() == defaults  # every value shown is the default
