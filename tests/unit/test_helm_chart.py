"""deploy/helm/herald, rendered by Helm's own template engine (Helm v4's Go code, through
helm-python-sdk: no helm binary installs on these machines) and validated offline against the
Kubernetes API's schemas -- then held to what Herald needs: migrations as a hook the pods wait
for, the cron, secrets by reference, a worker's time to stop, probes, PDBs and HPAs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from helm_python import Chart
from helm_python.errors import HelmRenderError, HelmValuesError

from app.core.config import Settings
from tests.fixtures.worker_stop import settings_from, worker_stop_seconds

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "herald"
VERSION = "1.30.0"
INSTALL = {"existingSecret": "herald-secrets"}


def render(values: dict[str, Any] | None = None, **options: Any) -> list[dict[str, Any]]:
    rendered = Chart.load(CHART).render(
        values={**INSTALL, **(values or {})}, name="prod", namespace="webhooks", **options
    )
    return [doc for text in rendered.values() for doc in yaml.safe_load_all(text) if doc]


DEFAULT = render(is_install=True)


def found(docs: list[dict[str, Any]], kind: str, suffix: str = "") -> dict[str, Any]:
    [doc] = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(suffix)]
    return doc


def pod(doc: dict[str, Any]) -> dict[str, Any]:
    spec = doc["spec"]
    if "jobTemplate" in spec:
        spec = spec["jobTemplate"]["spec"]
    spec_: dict[str, Any] = spec["template"]["spec"]
    return spec_


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"]}


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"ingress": {"enabled": True, "host": "hooks.example.com", "tlsSecretName": "tls"}},
        {"api": {"autoscaling": {"enabled": False}}, "worker": {"autoscaling": {"enabled": True}}},
    ],
    ids=["defaults", "ingress", "autoscaled-workers"],
)
def test_every_rendered_manifest_is_valid_kubernetes(values: dict[str, Any]) -> None:
    docs = render(values)
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, VERSION, strict=True)


def test_the_check_sees_an_invalid_manifest() -> None:
    broken = {**found(DEFAULT, "Deployment", "-api"), "spec": {"replicas": "two"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSION, strict=True)


def test_the_chart_makes_every_part_herald_runs_as() -> None:
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in DEFAULT)
    assert kinds == [
        ("CronJob", "prod-herald-reconcile"),
        ("Deployment", "prod-herald-api"),
        ("Deployment", "prod-herald-worker"),
        ("HorizontalPodAutoscaler", "prod-herald-api"),
        ("Job", "prod-herald-migrate-1"),
        ("PodDisruptionBudget", "prod-herald-api"),
        ("PodDisruptionBudget", "prod-herald-worker"),
        ("Service", "prod-herald-api"),
    ]


def test_migrations_are_a_pre_install_and_pre_upgrade_hook_the_pods_wait_for() -> None:
    job = found(DEFAULT, "Job")
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert "before-hook-creation" in annotations["helm.sh/hook-delete-policy"]
    [migrate] = pod(job)["containers"]
    assert migrate["args"] == ["herald", "migrate"]
    for suffix in ("-api", "-worker"):
        deployment = found(DEFAULT, "Deployment", suffix)
        [wait] = pod(deployment)["initContainers"]
        [main] = pod(deployment)["containers"]
        assert wait["args"] == ["herald", "migrate", "--wait"]
        assert wait["image"] == main["image"] == migrate["image"]
        assert wait["envFrom"] == main["envFrom"] == migrate["envFrom"]
    # Each release's hook is its own Job (a Job's pod template cannot change in place).
    upgraded = render(revision=7, is_upgrade=True)
    assert found(upgraded, "Job")["metadata"]["name"] == "prod-herald-migrate-7"


def test_secrets_are_named_never_held_and_a_missing_name_is_refused_in_words() -> None:
    for doc in DEFAULT:
        assert doc["kind"] != "Secret"
        if doc["kind"] in ("Deployment", "Job", "CronJob"):
            for container in pod(doc)["containers"] + pod(doc).get("initContainers", []):
                assert container["envFrom"] == [{"secretRef": {"name": "herald-secrets"}}]
                assert not {"HERALD_DATABASE_URL", "HERALD_SECRET_KEYS"} & set(env_of(container))
    with pytest.raises(HelmRenderError, match="existingSecret: name the Secret holding"):
        Chart.load(CHART).render(values={}, name="prod")


def test_values_outside_the_schema_are_refused_naming_the_field() -> None:
    for values, said in (
        ({"api": {"replicas": "two"}}, "/api/replicas"),
        ({"config": {"LOG_LEVEL": "debug"}}, "LOG_LEVEL"),
        ({"image": {"repository": "x", "pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
        ({"apiReplicas": 3}, "apiReplicas"),
    ):
        with pytest.raises(HelmValuesError, match=said):
            render(values)


def test_the_reconcile_cron_runs_alone_every_minute_and_starts_late_rather_than_never() -> None:
    cron = found(DEFAULT, "CronJob")
    assert cron["spec"]["schedule"] == "* * * * *"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    assert 0 < cron["spec"]["startingDeadlineSeconds"] <= 300
    [container] = pod(cron)["containers"]
    assert container["args"] == ["herald", "reconcile"]
    assert env_of(container)["HERALD_API_URL"] == "http://prod-herald-api:8000"


def test_a_worker_gets_the_readmes_time_to_stop_and_probes_fit_each_role() -> None:
    worker = found(DEFAULT, "Deployment", "-worker")
    [container] = pod(worker)["containers"]
    grace = pod(worker)["terminationGracePeriodSeconds"]
    assert grace >= worker_stop_seconds(settings_from(env_of(container)))
    assert container["livenessProbe"]["exec"]["command"] == ["herald", "worker", "--check"]
    [api] = pod(found(DEFAULT, "Deployment", "-api"))["containers"]
    assert api["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert api["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # A longer shutdown grace and a chart not changed to match: the rule says so.
    slower = render({"config": {"HERALD_WORKER_SHUTDOWN_GRACE_SECONDS": "300"}})
    [slow] = pod(found(slower, "Deployment", "-worker"))["containers"]
    assert grace < worker_stop_seconds(settings_from(env_of(slow)))


def test_an_autoscaled_deployment_leaves_its_replicas_to_the_hpa() -> None:
    api = found(DEFAULT, "Deployment", "-api")
    assert "replicas" not in api["spec"]
    hpa = found(DEFAULT, "HorizontalPodAutoscaler", "-api")
    assert hpa["spec"]["scaleTargetRef"]["name"] == api["metadata"]["name"]
    fixed = render({"api": {"replicas": 3, "autoscaling": {"enabled": False}}})
    assert found(fixed, "Deployment", "-api")["spec"]["replicas"] == 3
    assert [d for d in fixed if d["kind"] == "HorizontalPodAutoscaler"] == []


def test_every_setting_the_chart_names_is_one_herald_reads() -> None:
    named: set[str] = set()
    for doc in DEFAULT:
        if doc["kind"] in ("Deployment", "Job", "CronJob"):
            for container in pod(doc)["containers"] + pod(doc).get("initContainers", []):
                named |= set(env_of(container))
    known = {f"HERALD_{name.upper()}" for name in Settings.model_fields} | {"HERALD_ROLE"}
    assert named <= known, named - known


def test_the_readme_says_how_to_build_and_push_the_image() -> None:
    readme = (CHART / "README.md").read_text()
    assert "docker build -t" in readme and "docker push" in readme
    assert "helm install" in readme and "existingSecret" in readme
    documented = set(yaml.safe_load((CHART / "values.yaml").read_text()))
    for key in documented:
        assert f"`{key}" in readme, f"values.yaml's {key} is not in the chart's README"
