"""What a release says of itself, in the files and in what `make dist` builds of them: one
version everywhere (the server's, both clients', the chart's, the CHANGELOG's newest release),
the Apache-2.0 licence wherever a package manager looks, and each artefact holding what it
must."""

from __future__ import annotations

import json
import re
import tarfile
import tomllib
import zipfile
from pathlib import Path

import yaml

from app import __version__
from tests.fixtures.distributions import Dist

REPO = Path(__file__).resolve().parents[2]
LICENCE = "Apache-2.0"


def newest_release(changelog: str) -> str:
    """The version of the CHANGELOG's first release heading (``## [1.2.3] - 2026-12-05``);
    ``[Unreleased]`` above it is no release."""
    found = re.search(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", changelog, re.MULTILINE)
    assert found, "CHANGELOG.md has no release heading"
    return found.group(1)


def test_the_newest_release_is_read_below_unreleased() -> None:
    changelog = (
        "# Changelog\n\n## [Unreleased]\n\n## [2.1.0] - 2027-01-02\n\n## [2.0.0] - 2026-12-31\n"
    )
    assert newest_release(changelog) == "2.1.0"


def test_every_package_file_and_the_changelog_say_the_one_version() -> None:
    package = json.loads((REPO / "clients/typescript/package.json").read_text())
    lock = json.loads((REPO / "clients/typescript/package-lock.json").read_text())
    chart = yaml.safe_load((REPO / "deploy/helm/herald/Chart.yaml").read_text())
    [image] = yaml.safe_load((REPO / "deploy/kubernetes/kustomization.yaml").read_text())["images"]
    openapi = json.loads((REPO / "openapi/openapi.json").read_text())
    client = tomllib.loads((REPO / "clients/python/pyproject.toml").read_text())["project"]
    said = {
        "the Python client": client["version"],
        "the TypeScript client": package["version"],
        "its lockfile": lock["version"],
        "its lockfile's package": lock["packages"][""]["version"],
        "the chart": chart["version"],
        "the chart's app": chart["appVersion"],
        "the kustomization's image": image["newTag"],
        "the OpenAPI document": openapi["info"]["version"],
        "the CHANGELOG's newest release": newest_release((REPO / "CHANGELOG.md").read_text()),
    }
    assert {what: version for what, version in said.items() if version != __version__} == {}


def test_the_server_reads_its_version_from_the_code() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "app.__version__"}


def test_the_licence_is_stated_wherever_a_package_manager_looks() -> None:
    licence = (REPO / "LICENSE").read_text()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    for client in ("clients/python", "clients/typescript"):
        assert (REPO / client / "LICENSE").read_text() == licence, client
    for pyproject in ("pyproject.toml", "clients/python/pyproject.toml"):
        project = tomllib.loads((REPO / pyproject).read_text())["project"]
        assert (project["license"], project["license-files"]) == (LICENCE, ["LICENSE"])
    package = json.loads((REPO / "clients/typescript/package.json").read_text())
    assert package["license"] == LICENCE and "private" not in package
    chart = yaml.safe_load((REPO / "deploy/helm/herald/Chart.yaml").read_text())
    assert chart["annotations"]["artifacthub.io/license"] == LICENCE
    assert f'org.opencontainers.image.licenses="{LICENCE}"' in (REPO / "Dockerfile").read_text()


def wheel_metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        [metadata] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return archive.read(metadata).decode()


def test_the_wheels_carry_name_version_licence_and_licence_file(dist: Dist) -> None:
    for wheel, name in (
        (dist.server_wheel, "herald-webhooks"),
        (dist.client_wheel, "herald-webhooks-client"),
    ):
        metadata = wheel_metadata(wheel)
        assert f"\nName: {name}\n" in metadata
        assert f"\nVersion: {__version__}\n" in metadata
        assert f"\nLicense-Expression: {LICENCE}\n" in metadata
        with zipfile.ZipFile(wheel) as archive:
            assert any(n.endswith(".dist-info/licenses/LICENSE") for n in archive.namelist())


def test_the_server_sdist_holds_what_the_wheel_is_built_from(dist: Dist) -> None:
    # `make dist` builds the wheel from the sdist, so a file the sdist lacks is a file the
    # wheel lacks; these are the ones that are no Python module.
    with tarfile.open(dist.server_sdist) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    with zipfile.ZipFile(dist.server_wheel) as wheel:
        installed = set(wheel.namelist())
    needed = {
        "migrations/script.py.mako",
        "app/console/templates/base.html",
        "app/console/static/console.css",
        "app/portal/templates/portal.html",
        "app/portal/static/portal.js",
    }
    migrations = {
        p.relative_to(REPO).as_posix() for p in (REPO / "migrations/versions").glob("*.py")
    }
    assert {"LICENSE", "README.md", "pyproject.toml"} <= names
    assert (needed | migrations) - names == set()
    assert (needed | migrations) - installed == set()


def test_the_npm_tarball_holds_both_builds_and_the_licence_and_nothing_else(dist: Dist) -> None:
    with tarfile.open(dist.npm_tarball) as tarball:
        names = set(tarball.getnames())
        package = json.loads(tarball.extractfile("package/package.json").read())  # type: ignore[union-attr]
    assert {
        "package/LICENSE",
        "package/README.md",
        "package/dist/src/index.js",
        "package/dist/src/index.d.ts",
        "package/dist/cjs/index.js",
        "package/dist/cjs/index.d.ts",
        "package/dist/cjs/package.json",
    } <= names
    assert not {
        n for n in names if n.startswith(("package/dist/test", "package/src", "package/scripts"))
    }
    assert (package["name"], package["version"], package["license"]) == (
        "herald-webhooks-client",
        __version__,
        LICENCE,
    )


def test_the_chart_package_is_laid_out_as_helm_lays_it_out(dist: Dist) -> None:
    with tarfile.open(dist.chart) as chart:
        names = chart.getnames()
        metadata = yaml.safe_load(chart.extractfile("herald/Chart.yaml").read())  # type: ignore[union-attr]
    assert all(name.startswith("herald/") for name in names)
    assert {"herald/values.yaml", "herald/values.schema.json", "herald/templates/api.yaml"} <= set(
        names
    )
    assert (metadata["version"], metadata["appVersion"]) == (__version__, __version__)
