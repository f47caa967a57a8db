"""deploy/prometheus/alerts.yaml and deploy/grafana/herald.json speak of metrics Herald exposes:
every herald_* series an expression names is one the workers' registry or the API's fleet
gauges produce, so a renamed metric breaks this test rather than silencing an alert; every
`up{job=...}` names a job of deploy/prometheus/prometheus.yaml, which scrapes what the
Kubernetes manifests serve, with an admin key from a file; every runbook is a heading of
docs/operations.md."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import REGISTRY
from prometheus_client.core import Metric

import app.core.metrics  # noqa: F401  (registers the workers' counters and histograms)
from app.operations.service.fleet import FleetSnapshot, _SnapshotCollector

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
SERIES = re.compile(r"\bherald_[a-z_]+\b")
# Prometheus' own series about a scrape, by the job that names it.
SCRAPED = re.compile(r'\bup\{job="([^"]+)"\}')


def _series(families: list[Metric]) -> set[str]:
    names = set()
    for family in families:
        names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
    return names


def exposed() -> set[str]:
    fleet = FleetSnapshot(
        region="r",
        oldest_due=0,
        oldest_enqueued=0,
        relay_lag=0,
        by_state={"dead": 0},
        expired_leases=0,
        endpoints_paused=0,
        endpoints_disabled=0,
        endpoints_breaker_open=0,
        reconcile_age=math.inf,
        redis_up=True,
    )
    ours = [f for f in REGISTRY.collect() if f.name.startswith("herald_")]
    return _series(ours) | _series(list(_SnapshotCollector(fleet).collect()))


def alert_rules() -> list[dict[str, object]]:
    groups = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yaml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def scrape_config() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yaml").read_text())
    return config


def scrape_jobs() -> dict[str, dict[str, Any]]:
    return {job["job_name"]: job for job in scrape_config()["scrape_configs"]}


def manifests(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((DEPLOY / "kubernetes" / name).read_text()) if doc]


def runbook_anchors() -> set[str]:
    """The anchors GitHub gives docs/operations.md's headings."""
    headings = re.findall(r"^#+ (.+)$", (REPO / "docs" / "operations.md").read_text(), re.M)
    return {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}


def test_every_alert_names_series_herald_exposes_and_says_what_to_do() -> None:
    known, jobs, anchors = exposed(), scrape_jobs(), runbook_anchors()
    rules = alert_rules()
    assert {r["alert"] for r in rules} >= {
        "HeraldDown",
        "HeraldNotScraped",
        "HeraldReconcileStale",
        "HeraldOldestDueTooOld",
        "HeraldRelayLag",
        "HeraldDeadRising",
        "HeraldBreakerOpen",
        "HeraldRedisUnreachable",
    }
    for rule in rules:
        named = set(SERIES.findall(str(rule["expr"])))
        scraped = set(SCRAPED.findall(str(rule["expr"])))
        assert named or scraped, rule["alert"]
        assert named <= known, (rule["alert"], named - known)
        assert scraped <= set(jobs), (rule["alert"], scraped - set(jobs))
        annotations = rule["annotations"]
        assert isinstance(annotations, dict)
        runbook = str(annotations["runbook"])
        assert runbook.startswith("docs/operations.md#"), rule["alert"]
        assert runbook.removeprefix("docs/operations.md#").split(":")[0] in anchors, runbook


def test_an_alert_fires_when_herald_is_down_and_when_nobody_scrapes_it() -> None:
    exprs = {str(rule["expr"]).replace(" ", "") for rule in alert_rules()}
    # Every other rule reads series the API serves: without a scrape they are silent.
    assert 'up{job="herald-api"}==0' in exprs
    assert 'absent(up{job="herald-api"})' in exprs


def test_the_scrape_config_reaches_what_the_manifests_serve_with_an_admin_key_from_a_file() -> None:
    config = scrape_config()
    assert config["rule_files"] == ["alerts.yaml"]  # the file beside it
    api, worker = scrape_jobs()["herald-api"], scrape_jobs()["herald-worker"]
    # /metrics wants an admin key: a bearer token, read from a file (a mounted Secret), never
    # written into the configuration.
    assert api["metrics_path"] == "/metrics"
    assert api["authorization"]["type"] == "Bearer"
    assert set(api["authorization"]) == {"type", "credentials_file"}
    [service] = [d for d in manifests("20-api.yaml") if d["kind"] == "Service"]
    [port] = service["spec"]["ports"]
    [[target]] = [group["targets"] for group in api["static_configs"]]
    assert target == f"{service['metadata']['name']}:{port['port']}"
    # Each worker pod's port named "metrics", which is HERALD_WORKER_METRICS_PORT.
    [keep] = [r for r in worker["relabel_configs"] if r.get("action") == "keep"]
    [deployment] = [d for d in manifests("30-worker.yaml") if d["kind"] == "Deployment"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert keep["regex"] == ";".join(
        [labels["app.kubernetes.io/name"], labels["app.kubernetes.io/component"], "metrics"]
    )
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    [metrics_port] = [p for p in container["ports"] if p["name"] == "metrics"]
    [config_map] = manifests("00-config.yaml")
    assert str(metrics_port["containerPort"]) == config_map["data"]["HERALD_WORKER_METRICS_PORT"]


def test_every_dashboard_panel_names_series_herald_exposes() -> None:
    known = exposed()
    dashboard = json.loads((DEPLOY / "grafana" / "herald.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert exprs
    for expr in exprs:
        named = set(SERIES.findall(expr))
        assert named and named <= known, (expr, named - known)


def test_the_check_sees_a_series_nobody_exposes() -> None:
    assert "herald_reconcile_last_success_age_seconds" in exposed()
    assert "herald_no_such_thing" not in exposed()
