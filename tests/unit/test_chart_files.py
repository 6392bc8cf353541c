"""Chart files that need no helm: the CRD copies, the Grafana dashboard's queries (against the
metric names the broker, the operator and the Connect workers' exporter rules really export,
through promtool's PromQL parser, and some evaluated by promtool on sample series), and the kind
e2e script (shellcheck). Rendering and installing the chart is tests/k8s/test_chart.py.
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
from riverlog.schema_registry.metrics import RegistryMetrics
from riverlog_operator.builders.connect_metrics import metric_names as connect_metric_names
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
    broker.track_consumer_groups(lambda: [("g", "t", 0, 0, 1)], lambda: [
        ("g", "classic", "Stable", 1, None, 0), ("g2", "consumer", "Reconciling", 2, 5, 1)])
    broker.track_controller(lambda: (True, 0))
    broker.track_log_dirs(lambda: [("/data", True)])
    broker.track_transactions(lambda: [(0, 1, 2.5)], lambda: [("t", 0, 3)])
    broker.track_share_partitions(lambda: [("g", "t", 0, 10, 4, 2, 6)])
    from riverlog_operator.metrics import REGISTRY as operator_registry

    registry = RegistryMetrics()  # a schema registry instance's, with its scrape-time gauges
    registry.track_state(lambda: (1, 1, True, 0))
    return (exported_names(broker.registry) | exported_names(operator_registry) | connect_metric_names()
            | exported_names(registry.registry) | {"up"})


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


def queried(dash: dict[str, Any]) -> list[dict[str, Any]]:
    """The panels that query (rows only group them)."""
    return [p for p in dash["panels"] if p["type"] != "row"]


def test_dashboard_is_a_grafana_dashboard() -> None:
    dash = dashboard()
    assert dash["uid"] == "riverlog-overview" and dash["title"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) >= 10
    for panel in queried(dash):
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
    assert {"namespace", "cluster", "connect"} <= set(variables)
    # The Connect panels sit under a row of their own and select by the Connect (or Mirror); the
    # schema registry's under the next row, by the Cluster whose spec.schemaRegistry runs it.
    connect_row, registry_row = [p for p in dash["panels"] if p["type"] == "row"]
    assert (connect_row["title"], registry_row["title"]) == ("Kafka Connect and MirrorMaker 2", "Schema registry")
    start, end = connect_row["gridPos"]["y"], registry_row["gridPos"]["y"]
    connect = [p for p in queried(dash) if start < p["gridPos"]["y"] < end]
    assert connect and all('riverlog_connect=~"$connect"' in t["expr"] for p in connect for t in p["targets"])
    registry = [p for p in queried(dash) if p["gridPos"]["y"] > end]
    assert registry and all('riverlog_cluster=~"$cluster"' in t["expr"] and "riverlog_schema_registry_" in t["expr"]
                            for p in registry for t in p["targets"])


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
            "riverlog_transaction_oldest_open_seconds", "riverlog_operator_ca_expiry_timestamp_seconds",
            "riverlog_share_partition_lag", "riverlog_share_partition_start_offset"} <= used
    # Every transaction metric has a panel.
    assert {"riverlog_transactions_open", "riverlog_transaction_marker_latency_seconds_bucket",
            "riverlog_last_stable_offset_lag", "riverlog_coordinator_load_seconds_bucket"} <= used
    # Connect: states, failures, records through tasks, and the mirror's lag the alerts are about.
    assert {"riverlog_connect_connector_status", "riverlog_connect_task_status",
            "riverlog_connect_worker_connector_tasks", "riverlog_connect_source_records_written_total",
            "riverlog_connect_sink_records_read_total", "riverlog_mirror_record_age_max_seconds",
            "riverlog_mirror_replication_latency_max_seconds", "riverlog_mirror_checkpoint_latency_seconds"} <= used
    # The schema registry: requests, latency, schemas, errors, the writer.
    assert {"riverlog_schema_registry_requests_total", "riverlog_schema_registry_request_seconds_bucket",
            "riverlog_schema_registry_schemas", "riverlog_schema_registry_subjects",
            "riverlog_schema_registry_errors_total", "riverlog_schema_registry_writer",
            "riverlog_schema_registry_forwarded_total", "riverlog_schema_registry_writer_elections_total"} <= used


def grafana_to_promql(expr: str) -> str:
    """Grafana's variables replaced as Grafana would before sending the query."""
    return (expr.replace("$__rate_interval", "2m").replace("$namespace", ".*").replace("$cluster", ".*")
            .replace("$connect", ".*"))


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
    (panel,) = [p for p in queried(dashboard()) if any(metric in t["expr"] for t in p["targets"])]
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


def test_connect_panels_on_sample_series(tmp_path: Path) -> None:
    # The Connect row's queries evaluated by promtool, the variables set to namespace prod and
    # Connect "etl" or Mirror "dr": a worker's series as the exporter reports them (a connector's
    # and task's state on the worker that runs it, only the current state).
    panels = {p["title"]: p for p in queried(dashboard())}

    def expr(title: str, index: int = 0) -> str:
        text: str = panels[title]["targets"][index]["expr"]
        return text.replace("$namespace", "prod").replace("$connect", "etl|dr").replace("$__rate_interval", "2m")

    def sample(name: str, values: str, **labels: str) -> dict[str, str]:
        inner = ",".join(f'{k}="{v}"' for k, v in {"namespace": "prod", **labels}.items())
        return {"series": f"{name}{{{inner}}}", "values": values}

    etl = {"riverlog_connect": "etl", "riverlog_kind": "connect"}
    dr = {"riverlog_connect": "dr", "riverlog_kind": "mirror"}
    other = {"riverlog_connect": "elsewhere", "riverlog_kind": "connect"}
    remote = {"source": "old", "target": "new", "topic": "old.orders"}
    input_series = [
        sample("riverlog_connect_connector_status", "1x10", connector="db-in", status="running", pod="etl-a", **etl),
        sample("riverlog_connect_connector_status", "1x10", connector="db-out", status="failed", pod="etl-b", **etl),
        sample("riverlog_connect_connector_status", "1x10", connector="mirror-source", status="running", pod="dr-a",
               **dr),
        sample("riverlog_connect_connector_status", "1x10", connector="x", status="failed", pod="o-a", **other),
        sample("riverlog_connect_task_status", "1x10", connector="db-in", task="0", status="running", pod="etl-a",
               **etl),
        sample("riverlog_connect_task_status", "1x10", connector="db-in", task="1", status="failed", pod="etl-b",
               **etl),
        sample("riverlog_connect_task_status", "1x10", connector="mirror-source", task="0", status="running",
               pod="dr-a", **dr),
        *(sample("riverlog_connect_worker_tasks", "1x10", pod=pod, **labels)
          for pod, labels in (("etl-a", etl), ("etl-b", etl), ("dr-a", dr), ("o-a", other))),
        # 600 records a minute through the source task, 300 read by the sink task.
        sample("riverlog_connect_source_records_written_total", "0+600x10", connector="db-in", task="0", pod="etl-a",
               **etl),
        sample("riverlog_connect_sink_records_read_total", "0+300x10", connector="db-out", task="0", pod="etl-b",
               **etl),
        # The mirror: partition 1 of old.orders lags most; record age per topic is its largest.
        sample("riverlog_mirror_record_age_max_seconds", "2x10", partition="0", pod="dr-a", **remote, **dr),
        sample("riverlog_mirror_record_age_max_seconds", "90x10", partition="1", pod="dr-a", **remote, **dr),
        sample("riverlog_mirror_checkpoint_latency_seconds", "4x10", group="billing", partition="0", pod="dr-a",
               **remote, **dr),
    ]

    def states(*pairs: tuple[str, int]) -> list[dict[str, Any]]:
        return [{"labels": f'{{status="{status}"}}', "value": value} for status, value in pairs]

    tests = {"rule_files": ["none.yaml"], "tests": [{"interval": "1m", "input_series": input_series,
                                                      "promql_expr_test": [
        {"expr": expr("Connectors by state"), "eval_time": "5m", "exp_samples": states(("failed", 1), ("running", 2))},
        {"expr": expr("Tasks by state"), "eval_time": "5m", "exp_samples": states(("failed", 1), ("running", 2))},
        {"expr": expr("Failed connectors and tasks"), "eval_time": "5m", "exp_samples": [{"labels": "{}", "value": 2}]},
        {"expr": expr("Workers reporting"), "eval_time": "5m", "exp_samples": [{"labels": "{}", "value": 3}]},
        {"expr": expr("Source records written per connector"), "eval_time": "5m", "exp_samples": [
            {"labels": '{connector="db-in", riverlog_connect="etl"}', "value": 10}]},
        {"expr": expr("Sink records read per connector"), "eval_time": "5m", "exp_samples": [
            {"labels": '{connector="db-out", riverlog_connect="etl"}', "value": 5}]},
        {"expr": expr("Mirror lag: record age per topic"), "eval_time": "5m", "exp_samples": [
            {"labels": '{riverlog_connect="dr", source="old", topic="old.orders"}', "value": 90}]},
        {"expr": expr("Mirror checkpoint latency per group"), "eval_time": "5m", "exp_samples": [
            {"labels": '{group="billing", riverlog_connect="dr"}', "value": 4}]},
        {"expr": expr("Failed connectors and tasks over time", 1), "eval_time": "5m", "exp_samples": [
            {"labels": '{connector="db-in", riverlog_connect="etl", task="1"}', "value": 1}]},
    ]}]}
    (tmp_path / "none.yaml").write_text("groups: []\n")
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    proc = subprocess.run([str(promtool.ensure()), "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_schema_registry_panels_on_sample_series(tmp_path: Path) -> None:
    # The registry row's queries evaluated by promtool, the variables set to namespace prod and
    # Cluster demo: two instances of demo's registry (a is the writer) as their /metrics reports
    # them, and one of another Cluster's.
    panels = {p["title"]: p for p in queried(dashboard())}

    def expr(title: str, index: int = 0) -> str:
        text: str = panels[title]["targets"][index]["expr"]
        return text.replace("$namespace", "prod").replace("$cluster", "demo").replace("$__rate_interval", "2m")

    def sample(name: str, values: str, pod: str, cluster: str = "demo", **labels: str) -> dict[str, str]:
        inner = ",".join(f'{k}="{v}"' for k, v in {"namespace": "prod", "riverlog_cluster": cluster, "pod": pod,
                                                   **labels}.items())
        return {"series": f"{name}{{{inner}}}", "values": values}

    post = {"method": "POST", "endpoint": "/subjects/{subject}/versions"}
    get_id = {"method": "GET", "endpoint": "/schemas/ids/{id}"}
    input_series = [
        sample("riverlog_schema_registry_writer", "1x10", "sr-a"),
        sample("riverlog_schema_registry_writer", "0x10", "sr-b"),
        sample("riverlog_schema_registry_writer", "1x10", "other-a", cluster="other"),
        sample("riverlog_schema_registry_schemas", "7x10", "sr-a"),
        sample("riverlog_schema_registry_schemas", "7x10", "sr-b"),
        sample("riverlog_schema_registry_subjects", "3x10", "sr-a"),
        # 120 registrations a minute (60 on each instance), 600 reads by id on b, 60 refused as
        # incompatible (409) and 60 without a writer (50004, status 500) on b.
        sample("riverlog_schema_registry_requests_total", "0+60x10", "sr-a", status="200", **post),
        sample("riverlog_schema_registry_requests_total", "0+60x10", "sr-b", status="200", **post),
        sample("riverlog_schema_registry_requests_total", "0+600x10", "sr-b", status="200", **get_id),
        sample("riverlog_schema_registry_requests_total", "0+60x10", "sr-b", status="500", **post),
        sample("riverlog_schema_registry_requests_total", "0+6000x10", "other-a", cluster="other", status="500",
               **post),
        sample("riverlog_schema_registry_errors_total", "0+60x10", "sr-b", error_code="409"),
        sample("riverlog_schema_registry_errors_total", "0+60x10", "sr-b", error_code="50004"),
        # Every POST on a took 3 ms (the 0.0025-0.005 bucket).
        *(sample("riverlog_schema_registry_request_seconds_bucket", f"0+{n}x10", "sr-a", le=le, **post)
          for le, n in (("0.0025", 0), ("0.005", 60), ("+Inf", 60))),
        sample("riverlog_schema_registry_forwarded_total", "0+60x10", "sr-b"),
        sample("riverlog_schema_registry_writer_elections_total", "1x10", "sr-a"),
    ]
    demo = '{riverlog_cluster="demo"}'
    tests = {"rule_files": ["none.yaml"], "tests": [{"interval": "1m", "input_series": input_series,
                                                      "promql_expr_test": [
        {"expr": expr("Registry instances reporting"), "eval_time": "5m",
         "exp_samples": [{"labels": demo, "value": 2}]},
        {"expr": expr("Registry writers elected"), "eval_time": "5m", "exp_samples": [{"labels": demo, "value": 1}]},
        {"expr": expr("Schemas registered"), "eval_time": "5m", "exp_samples": [{"labels": demo, "value": 7}]},
        {"expr": expr("Subjects"), "eval_time": "5m", "exp_samples": [{"labels": demo, "value": 3}]},
        {"expr": expr("Registry requests per endpoint"), "eval_time": "5m", "exp_samples": [
            {"labels": '{endpoint="/subjects/{subject}/versions", method="POST", riverlog_cluster="demo"}',
             "value": 3},
            {"labels": '{endpoint="/schemas/ids/{id}", method="GET", riverlog_cluster="demo"}', "value": 10}]},
        {"expr": expr("Registry request latency p99 per endpoint"), "eval_time": "5m", "exp_samples": [
            {"labels": '{endpoint="/subjects/{subject}/versions", method="POST"}', "value": 0.004975}]},
        {"expr": expr("Registry errors per error code"), "eval_time": "5m", "exp_samples": [
            {"labels": '{error_code="409", riverlog_cluster="demo"}', "value": 1},
            {"labels": '{error_code="50004", riverlog_cluster="demo"}', "value": 1}]},
        {"expr": expr("Registry server errors (5xx)"), "eval_time": "5m", "exp_samples": [
            {"labels": '{endpoint="/subjects/{subject}/versions", riverlog_cluster="demo"}', "value": 1}]},
        {"expr": expr("Registry writes forwarded and elections"), "eval_time": "5m", "exp_samples": [
            {"labels": demo, "value": 1}]},
    ]}]}
    (tmp_path / "none.yaml").write_text("groups: []\n")
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
