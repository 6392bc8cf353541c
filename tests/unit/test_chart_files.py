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
    # No two panels share a grid cell.
    cells: dict[tuple[int, int], str] = {}
    for panel in dash["panels"]:
        x, y, w, h = (panel["gridPos"][k] for k in "xywh")
        for cell in ((i, j) for i in range(x, x + w) for j in range(y, y + h)):
            assert cell not in cells, f"{panel['title']} overlaps {cells[cell]}"
            cells[cell] = panel["title"]
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
            "riverlog_transaction_oldest_open_seconds", "riverlog_operator_ca_expiry_timestamp_seconds"} <= used
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


def test_dashboard_shows_days_until_each_ca_expires(tmp_path: Path) -> None:
    metric = "riverlog_operator_ca_expiry_timestamp_seconds"
    (panel,) = [p for p in dashboard()["panels"] if any(metric in t["expr"] for t in p["targets"])]
    # Red where RiverlogCertificateAuthorityExpiring fires (under 14 days), yellow once a CA is
    # past the operator's default renewal point (renewalDays 30) without having been renewed.
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [(s["color"], s["value"]) for s in steps] == [("red", None), ("yellow", 14), ("green", 30)]
    assert "(riverlog_operator_ca_expiry_timestamp_seconds) - time() < 14 * 86400" in (
        CHART / "templates" / "prometheusrule.yaml").read_text()
    (target,) = panel["targets"]
    assert set(re.findall(r"\{\{(\w+)\}\}", target["legendFormat"])) == {"cluster_namespace", "cluster", "ca"}
    # Evaluated by promtool with the variables set to one namespace and cluster: days from now,
    # only that Cluster's CAs. The operator's metrics carry its own pod's namespace as "namespace";
    # the Cluster's is "cluster_namespace".
    expr = target["expr"].replace("$namespace", "prod").replace("$cluster", "demo")

    def ca(cluster_namespace: str, cluster: str, kind: str, days: int) -> dict[str, str]:
        return {"series": f'{metric}{{namespace="riverlog",pod="riverlog-operator-0",'
                          f'cluster_namespace="{cluster_namespace}",cluster="{cluster}",ca="{kind}"}}',
                "values": f"{days * 86400}x48"}

    def days(kind: str, value: int) -> dict[str, Any]:
        return {"labels": f'{{ca="{kind}", cluster="demo", cluster_namespace="prod"}}', "value": value}

    (tmp_path / "none.yaml").write_text("groups: []\n")
    tests = {"rule_files": ["none.yaml"], "tests": [{
        "interval": "1h",
        "input_series": [ca("prod", "demo", "cluster", 10), ca("prod", "demo", "clients", 40),
                         ca("prod", "calm", "cluster", 365), ca("staging", "demo", "cluster", 5)],
        "promql_expr_test": [
            {"expr": expr, "eval_time": "0m", "exp_samples": [days("cluster", 10), days("clients", 40)]},
            {"expr": expr, "eval_time": "1d", "exp_samples": [days("cluster", 9), days("clients", 39)]},
        ]}]}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    proc = subprocess.run([str(promtool.ensure()), "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


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
