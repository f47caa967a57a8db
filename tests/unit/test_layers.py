"""`make lint` fails on an upward or a cross-domain import (pyproject.toml's import-linter
contracts, docs/architecture.md): each contract is shown breaking on a copy of the code."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
PACKAGES = ("app", "workers", "devstack", "tests", "bench")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root), "COLUMNS": "400"},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("layers")
    for package in PACKAGES:
        shutil.copytree(
            REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def test_the_code_as_it_is_keeps_every_contract(copy: Path) -> None:
    result = lint_imports(copy)
    assert result.returncode == 0, result.stdout


def assert_breaks(copy: Path, module: str, line: str, contract: str) -> None:
    """Plant ``line`` in ``module`` of the copy: lint-imports fails, naming ``contract``."""
    path = copy / module
    original = path.read_text()
    path.write_text(f"{original}\n{line}  # noqa\n")
    try:
        result = lint_imports(copy)
    finally:
        path.write_text(original)
    assert result.returncode != 0
    broken = [line for line in result.stdout.splitlines() if line.endswith(" BROKEN")]
    assert any(line.startswith(contract) for line in broken), result.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        (  # a repository reaching up to its domain's service
            "app/engine/repository/delivery_leases.py",
            "from app.engine.service import pump",
            "Inside a domain: routes call its services",
        ),
        (  # a service reaching into another domain's repository
            "app/engine/service/pump.py",
            "from app.delivery.repository import deliveries",
            "Other domains reach delivery through its service",
        ),
        (  # a service reaching up to the HTTP plumbing
            "app/flow/service/wakeups.py",
            "from app.api import deps",
            "Across the product: routes, then the HTTP plumbing",
        ),
        (  # a service reaching up to the app's resources, which hold it
            "app/outbox/service/publishing.py",
            "from app.runtime import resources",
            "Across the product: routes, then the HTTP plumbing",
        ),
        (  # the HTTP plumbing reaching past the resources into a domain
            "app/api/deps.py",
            "from app.outbox.service import publishing",
            "The HTTP plumbing reaches the domains through the app's resources",
        ),
        (  # the shared kernel reaching into a domain
            "app/core/db.py",
            "from app.outbox.service import publishing",
            "The shared kernel knows no domain",
        ),
        (  # the kernel's errors rendering themselves as HTTP (app/api/problems.py does)
            "app/core/errors.py",
            "from fastapi.responses import JSONResponse",
            "The shared kernel knows no domain",
        ),
        (  # an attempt writing its own record
            "app/engine/service/attempts.py",
            "from app.engine.repository import delivery_records",
            "An attempt decides and sends",
        ),
        (  # the product importing the dev tooling
            "workers/runner.py",
            "from devstack import dev",
            "The product imports no dev or test tooling",
        ),
    ],
)
def test_each_kind_of_wrong_import_breaks_its_contract(
    copy: Path, module: str, line: str, broken: str
) -> None:
    assert_breaks(copy, module, line, broken)


def _domains_with(layer: str) -> list[str]:
    return sorted(p.parent.parent.name for p in (REPO / "app").glob(f"*/{layer}/__init__.py"))


@pytest.mark.parametrize("domain", _domains_with("repository"))
def test_every_domains_repository_is_its_own(copy: Path, domain: str) -> None:
    table_module = sorted((REPO / "app" / domain / "repository").glob("[!_]*.py"))[0].stem
    # Planted in a service of some other domain: the engine's, or the delivery's for the engine.
    intruder = (
        "app/delivery/service/intake.py" if domain == "engine" else "app/engine/service/pump.py"
    )
    planted = f"from app.{domain}.repository import {table_module}"
    assert_breaks(copy, intruder, planted, f"Other domains reach {domain} through its service")


@pytest.mark.parametrize("domain", _domains_with("routes"))
def test_every_domains_routes_are_its_own(copy: Path, domain: str) -> None:
    routes_module = sorted((REPO / "app" / domain / "routes").glob("[!_]*.py"))[0].stem
    intruder = (
        "app/reconcile/routes/reconcile.py"
        if domain != "reconcile"
        else "app/tenants/routes/tenants.py"
    )
    planted = f"from app.{domain}.routes import {routes_module}"
    assert_breaks(copy, intruder, planted, f"Other domains reach {domain} through its service")


ORDER = "Domain services import only those below them"


@pytest.mark.parametrize(
    ("module", "line"),
    [
        # Two knots between domains, untied once and planted back: flow's gate taking delivery's
        # type ...
        ("app/flow/service/gate.py", "from app.delivery.service import status"),
        # ... and the endpoints service building its stats from delivery's service.
        ("app/endpoints/service/endpoints.py", "from app.delivery.service import endpoint_stats"),
        # Siblings on one layer import neither way: delivery's intake reaching into the engine.
        ("app/delivery/service/intake.py", "from app.engine.service import pump"),
        # The bottom layer imports no domain service: tenants reaching up to endpoints.
        ("app/tenants/service/tenants.py", "from app.endpoints.service import endpoints"),
    ],
)
def test_a_domain_service_importing_one_above_it_breaks_the_order(
    copy: Path, module: str, line: str
) -> None:
    assert_breaks(copy, module, line, ORDER)


def test_every_domains_service_has_a_place_in_the_order() -> None:
    """A new domain's service left out of the order could import any other unchecked."""
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (order,) = [c for c in contracts["contracts"] if c["name"].startswith(ORDER)]
    placed = {module.strip() for layer in order["layers"] for module in layer.split("|")}
    assert placed == {f"app.{domain}.service" for domain in _domains_with("service")}
