"""deploy/kubernetes, validated offline against the Kubernetes API's schemas (kubernetes-validate:
there is no cluster here), and held to what Herald needs of it: the cron, a worker's grace by the
rule docs/operations.md states (computed from the settings the manifests give it), health checks
that fit each role, settings that exist."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from app.core.config import Settings
from tests.fixtures.worker_stop import settings_from, worker_stop_seconds

KUBERNETES = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
MANIFESTS = sorted(p for p in KUBERNETES.glob("*.yaml") if p.name != "kustomization.yaml")
DOCUMENTS = [doc for path in MANIFESTS for doc in yaml.safe_load_all(path.read_text()) if doc]
VERSION = "1.30.0"


def kind(name: str) -> dict[str, Any]:
    [found] = [doc for doc in DOCUMENTS if doc["kind"] == name]
    assert isinstance(found, dict)
    return found


def named(kind_name: str, name: str) -> dict[str, Any]:
    [found] = [d for d in DOCUMENTS if d["kind"] == kind_name and d["metadata"]["name"] == name]
    assert isinstance(found, dict)
    return found


def pod(doc: dict[str, Any]) -> dict[str, Any]:
    spec = doc["spec"]
    if "jobTemplate" in spec:
        spec = spec["jobTemplate"]["spec"]
    found: dict[str, Any] = spec["template"]["spec"]
    return found


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = pod(doc)["containers"]
    return found


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_each_manifest_is_valid_kubernetes(doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, VERSION, strict=True)


def test_the_check_sees_an_invalid_manifest() -> None:
    broken = {**named("Deployment", "herald-api"), "spec": {"replicas": "two"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSION, strict=True)


def test_kustomize_lists_every_manifest() -> None:
    listed = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())["resources"]
    assert listed == [path.name for path in MANIFESTS]


def test_the_reconcile_cron_runs_alone_every_minute_and_starts_late_rather_than_never() -> None:
    cron = kind("CronJob")["spec"]
    assert cron["schedule"] == "* * * * *"
    assert cron["concurrencyPolicy"] == "Forbid"
    assert 0 < cron["startingDeadlineSeconds"] <= 300
    [container] = containers(kind("CronJob"))
    assert container["args"] == ["herald", "reconcile"]


def container_env(container: dict[str, Any]) -> dict[str, str]:
    """The settings a container is started with: the ConfigMap (the Secret holds only URLs and
    the admin key), then its own ``env``."""
    assert {"configMapRef": {"name": "herald"}} in container["envFrom"]
    env = dict(kind("ConfigMap")["data"])
    env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
    return env


def test_a_worker_gets_the_readmes_time_to_stop_and_a_liveness_of_its_own() -> None:
    worker = named("Deployment", "herald-worker")
    grace = worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    [container] = containers(worker)
    assert grace >= worker_stop_seconds(settings_from(container_env(container)))
    assert container["livenessProbe"]["exec"]["command"] == ["herald", "worker", "--check"]
    [api] = containers(named("Deployment", "herald-api"))
    assert api["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert api["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {d["kind"] for d in DOCUMENTS} >= {"PodDisruptionBudget", "HorizontalPodAutoscaler"}


@pytest.mark.parametrize("name", ["herald-api", "herald-worker"])
def test_the_api_and_the_workers_start_only_once_the_migration_job_has_run(name: str) -> None:
    deployment = named("Deployment", name)
    [wait] = pod(deployment)["initContainers"]
    [main] = containers(deployment)
    # The release's own image, the release's own database: it waits for what the Job applies.
    assert wait["args"] == ["herald", "migrate", "--wait"]
    assert wait["image"] == main["image"] == "herald"
    assert wait["envFrom"] == main["envFrom"]
    assert wait["securityContext"] == main["securityContext"]
    [job] = containers(kind("Job"))
    assert job["args"] == ["herald", "migrate"] and job["envFrom"] == main["envFrom"]


def test_every_setting_the_manifests_name_is_one_herald_reads() -> None:
    named_settings = set(kind("ConfigMap")["data"])
    for doc in DOCUMENTS:
        if doc["kind"] in ("Deployment", "Job", "CronJob"):
            for container in containers(doc) + pod(doc).get("initContainers", []):
                named_settings |= {e["name"] for e in container.get("env", [])}
    known = {f"HERALD_{name.upper()}" for name in Settings.model_fields} | {"HERALD_ROLE"}
    assert named_settings <= known, named_settings - known


def test_every_container_runs_the_image_the_kustomization_names_and_the_readme_says_how() -> None:
    for doc in DOCUMENTS:
        if doc["kind"] in ("Deployment", "Job", "CronJob"):
            for container in containers(doc) + pod(doc).get("initContainers", []):
                assert container["image"] == "herald", doc["metadata"]["name"]
    [image] = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())["images"]
    assert image["name"] == "herald" and {"newName", "newTag"} <= set(image)
    # The name is replaced only by kustomize, and the image is for the reader to build.
    readme = (KUBERNETES / "README.md").read_text()
    assert "kubectl apply -k" in readme and "kubectl apply -f deploy/kubernetes" not in readme
    assert "docker build -t" in readme and "docker push" in readme
    assert "kustomize edit set image herald=" in readme


def test_every_deployment_says_where_browsers_reach_herald() -> None:
    """Portal links are made under HERALD_PUBLIC_URL: without it, a link minted through an
    internal URL sends a customer there."""
    repo = KUBERNETES.parents[1]
    [config] = [doc for doc in DOCUMENTS if doc["kind"] == "ConfigMap"]
    helm = yaml.safe_load((repo / "deploy" / "helm" / "herald" / "values.yaml").read_text())
    compose = (repo / "deploy" / "herald.env.example").read_text().splitlines()
    assert config["data"]["HERALD_PUBLIC_URL"].startswith("https://")
    assert helm["config"]["HERALD_PUBLIC_URL"].startswith("https://")
    assert "HERALD_PUBLIC_URL=http://localhost:8000" in compose
