"""docs/configuration.md, written from Herald's ``Settings``.

Each setting's environment variable, type, bounds and default are read from the model, so the
page cannot say other than what Herald does; what a setting is for is written in settings.toml,
for the operator who sets it. ``make docs`` (``python -m devstack.settings_doc``) writes the page;
tests/unit/test_configuration_doc.py renders it again and fails when the file differs. A setting
added to ``Settings`` without a description there stops the render, naming it."""

from __future__ import annotations

import sys
import tomllib
import types
import typing
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import AnyHttpUrl, SecretStr
from pydantic.fields import FieldInfo

from app.core.config import Settings

PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
PREFIX = "HERALD_"

# The page's sections, in order: each a title and its settings, each with what it does. What a
# setting is for is prose for the operator, kept in settings.toml beside this file; what it is
# (type, bounds, default) comes from Settings.
DESCRIPTIONS = Path(__file__).with_name("settings.toml")
SECTIONS: list[tuple[str, list[tuple[str, str]]]] = [
    (section["title"], list(section["settings"].items()))
    for section in tomllib.loads(DESCRIPTIONS.read_text())["section"]
]

HEADER = """\
# Configuration

<!-- Written by `make docs` from Settings (app/core/config.py) and devstack/settings.toml, which
     holds the descriptions: edit those, not this page. A test fails when they differ. -->

Herald reads its settings from the environment, each named `HERALD_` and the setting's name.
Every process validates them at start-up and stops on a bad one with a message naming it
(`herald: invalid configuration: HERALD_PORT: ...`). [`.env.example`](../.env.example) lists
them all with their defaults. A `HERALD_` variable that names no setting is ignored.

Two variables that are not Herald's own matter too:

- `OTEL_EXPORTER_OTLP_ENDPOINT` (OpenTelemetry's standard name): when set, the API and workers
  export spans (accept, publish, attempt, record) over OTLP/HTTP, and the other `OTEL_*`
  variables apply. Unset, tracing costs nothing, and a producer's `traceparent` is still
  carried to the receiver on every webhook request.
- `FORWARDED_ALLOW_IPS` (uvicorn's): the proxies whose `X-Forwarded-*` headers `herald api`
  believes (`127.0.0.1` unless set); see [operations.md](operations.md#in-front-of-herald-api).
"""


def _kind(field: FieldInfo) -> str:
    """The setting's type, as the operator writes it in the environment."""
    annotation: Any = field.annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(arg for arg in typing.get_args(annotation) if arg is not type(None))
    if typing.get_origin(annotation) is typing.Literal:
        return " or ".join(f"`{value}`" for value in typing.get_args(annotation))
    if typing.get_origin(annotation) is tuple:
        [item, _] = typing.get_args(annotation)
        kinds = {float: "numbers", str: "URLs"}
        return f"comma-separated {kinds.get(item, 'CIDRs')}"
    names: dict[Any, str] = {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "text",
        Path: "path",
        SecretStr: "secret",
        AnyHttpUrl: "URL",
    }
    return names[annotation]


def _bounds(field: FieldInfo) -> str:
    """The setting's bounds, as Settings checks them."""
    said: list[str] = []
    for rule in field.metadata:
        if isinstance(rule, annotated_types.Ge):
            said.append(f"≥ {_number(rule.ge)}")
        elif isinstance(rule, annotated_types.Gt):
            said.append(f"> {_number(rule.gt)}")
        elif isinstance(rule, annotated_types.Le):
            said.append(f"≤ {_number(rule.le)}")
        elif isinstance(rule, annotated_types.MinLen):
            said.append(f"at least {rule.min_length} characters")
        elif getattr(rule, "pattern", None):
            said.append(f"matching `{rule.pattern}`")
    return ", ".join(said)


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _default(field: FieldInfo) -> str:
    value = field.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple):
        return f"`{','.join(_number(item) for item in value)}`" if value else "empty"
    return f"`{_number(value)}`"


def render() -> str:
    """The page, from Settings and SECTIONS; raises ValueError when they name different
    settings."""
    fields = Settings.model_fields
    described = [name for _, settings in SECTIONS for name, _ in settings]
    missing = [name for name in fields if name not in described]
    unknown = [name for name in described if name not in fields]
    repeated = sorted({name for name in described if described.count(name) > 1})
    if missing or unknown or repeated:
        raise ValueError(
            "devstack/settings.toml and Settings disagree: "
            f"no description for {missing}, no such setting {unknown}, described twice {repeated}"
        )
    parts = [HEADER]
    for title, settings in SECTIONS:
        rows = [
            f"## {title}",
            "",
            "| variable | type | default | what it does |",
            "|---|---|---|---|",
        ]
        for name, description in settings:
            field = fields[name]
            kind = ", ".join(part for part in (_kind(field), _bounds(field)) if part)
            variable = f"`{PREFIX}{name.upper()}`"
            rows.append(f"| {variable} | {kind} | {_default(field)} | {description} |")
        parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)


def main() -> None:
    PAGE.write_text(render())
    sys.stdout.write(f"wrote {PAGE}\n")


if __name__ == "__main__":
    main()
