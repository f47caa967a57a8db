"""deploy/prometheus/alerts.yaml and deploy/grafana/herald.json speak of metrics Herald exposes:
every herald_* series an expression names is one the workers' registry or the API's fleet
gauges produce, so a renamed metric breaks this test rather than silencing an alert."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import yaml
from prometheus_client import REGISTRY
from prometheus_client.core import Metric

import app.metrics  # noqa: F401  (registers the workers' counters and histograms)
from app.operations.service.fleet import FleetSnapshot, _SnapshotCollector

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
SERIES = re.compile(r"\bherald_[a-z_]+\b")


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


def test_every_alert_names_series_herald_exposes_and_says_what_to_do() -> None:
    known = exposed()
    rules = alert_rules()
    assert {r["alert"] for r in rules} >= {
        "HeraldReconcileStale",
        "HeraldOldestDueTooOld",
        "HeraldRelayLag",
        "HeraldDeadRising",
        "HeraldBreakerOpen",
        "HeraldRedisUnreachable",
    }
    for rule in rules:
        named = set(SERIES.findall(str(rule["expr"])))
        assert named and named <= known, (rule["alert"], named - known)
        annotations = rule["annotations"]
        assert isinstance(annotations, dict)
        assert str(annotations["runbook"]).startswith("docs/operations.md#")


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
