"""Chart files that need no helm: the CRD copies, the Grafana dashboard's queries (against the
metric names the broker and the operator really export, and through promtool's PromQL parser),
and the kind e2e script (shellcheck). Rendering and installing the chart is tests/k8s/test_chart.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.registry import CollectorRegistry
from riverlog.metrics import Metrics
from support import promtool

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "riverlog"
DASHBOARD = CHART / "dashboards" / "riverlog.json"


def test_chart_crds_are_identical_to_crds() -> None:
    source = {p.name: p.read_bytes() for p in (ROOT / "crds").glob("*.yaml")}
    copy = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    assert source, "crds/ is empty"
    assert sorted(copy) == sorted(source), "charts/riverlog/crds/ must hold exactly crds/*.yaml (make chart-crds)"
    for name, data in source.items():
        assert copy[name] == data, f"charts/riverlog/crds/{name} differs from crds/{name} (make chart-crds)"
    # Helm installs crds/ verbatim (no templating): every document must be a plain CRD.
    for name, data in copy.items():
        for doc in yaml.safe_load_all(data):
            assert doc["kind"] == "CustomResourceDefinition", name
            assert "{{" not in data.decode(), name


def exported_names(registry: CollectorRegistry) -> set[str]:
    """Sample names Prometheus would store for a registry's families (counters get _total,
    histograms _bucket/_sum/_count), whether or not a labelled child exists yet."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}
    names: set[str] = set()
    for family in registry.collect():
        names |= {family.name + s for s in suffixes.get(family.type, ("",))}
        names |= {sample.name for sample in family.samples}
    return names


def known_metric_names() -> set[str]:
    broker = Metrics()
    # The scrape-time collectors with one sample each, as a live broker registers them.
    broker.track_partitions(lambda: [("t", 0, 1, 0, 1, 1, True, 1, 1)])
    broker.track_consumer_groups(lambda: [("g", "t", 0, 0, 1)], lambda: [("g", "Stable", 1)])
    broker.track_controller(lambda: (True, 0))
    broker.track_log_dirs(lambda: [("/data", True)])
    broker.track_transactions(lambda: [(0, 1, 2.5)], lambda: [("t", 0, 3)])
    from riverlog_operator.metrics import REGISTRY as operator_registry

    return exported_names(broker.registry) | exported_names(operator_registry) | {"up"}


METRIC = re.compile(r"\b((?:riverlog|process)_[a-z0-9_]+|up)\b")


def metric_names_in(expr: str) -> set[str]:
    """Metric names a PromQL expression reads (label matchers and grouping labels removed)."""
    expr = re.sub(r"\{[^}]*\}", "", expr)
    expr = re.sub(r"\b(by|without)\s*\([^)]*\)", "", expr)
    return set(METRIC.findall(expr))


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def panel_exprs(dash: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]


def test_dashboard_is_a_grafana_dashboard() -> None:
    dash = dashboard()
    assert dash["uid"] == "riverlog-overview" and dash["title"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) >= 10
    for panel in dash["panels"]:
        assert panel["targets"], panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    assert {"namespace", "cluster"} <= set(variables)


def test_dashboard_reads_only_metrics_that_exist() -> None:
    known = known_metric_names()
    dash = dashboard()
    exprs = panel_exprs(dash)
    # The variables' label_values(<metric>, <label>) queries name a metric too.
    exprs += [v["query"]["query"].removeprefix("label_values(").rsplit(",", 1)[0]
              for v in dash["templating"]["list"] if isinstance(v.get("query"), dict)]
    used: set[str] = set()
    for expr in exprs:
        names = metric_names_in(expr)
        assert names, expr
        assert names <= known, f"{expr}: unknown {names - known}"
        used |= names
    # The headline gauges the alerts are about are all on the dashboard.
    assert {"riverlog_active_controller_count", "riverlog_offline_partitions_count", "riverlog_offline_log_dirs_count",
            "riverlog_under_replicated_partitions", "riverlog_consumer_group_lag",
            "riverlog_transaction_oldest_open_seconds"} <= used
    # Every transaction metric has a panel.
    assert {"riverlog_transactions_open", "riverlog_transaction_marker_latency_seconds_bucket",
            "riverlog_last_stable_offset_lag", "riverlog_coordinator_load_seconds_bucket"} <= used


def grafana_to_promql(expr: str) -> str:
    """Grafana's variables replaced as Grafana would before sending the query."""
    return (expr.replace("$__rate_interval", "2m").replace("$namespace", ".*").replace("$cluster", ".*"))


def test_dashboard_queries_parse_as_promql(tmp_path: Path) -> None:
    # promtool parses recording rules' expressions with Prometheus' own parser.
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query{i}", "expr": grafana_to_promql(expr)}
        for i, expr in enumerate(panel_exprs(dashboard()))]}]}
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    proc = subprocess.run([str(promtool.ensure()), "check", "rules", str(path)], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(rules['groups'][0]['rules'])} rules found" in proc.stdout


def test_kind_script_is_marked_as_needing_docker_and_passes_shellcheck() -> None:
    script = ROOT / "e2e" / "kind.sh"
    head = script.read_text().split("set -euo pipefail")[0]
    assert "NEEDS DOCKER" in head and "NOT run by `make test`" in head
    assert script.stat().st_mode & 0o111, "e2e/kind.sh is not executable"
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck comes from Debian (make system-deps)"
    proc = subprocess.run([shellcheck, str(script), str(ROOT / "scripts" / "install.sh")], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # It applies the sample resources the README points to.
    for sample in ("examples/cluster.yaml", "examples/topic.yaml"):
        assert sample in script.read_text()
        assert (ROOT / sample).exists(), sample
