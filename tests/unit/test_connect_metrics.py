"""The JMX exporter rules of Connect workers (builders/connect_metrics.py): well formed, one metric
name each, and each MBean attribute, written as the exporter writes it before matching
("domain<key=value, ...><>attribute: value"), lands in the metric it should and no other. The
real agent on real workers is tests/cluster/test_connect_distributed.py and test_mirror_maker.py."""

from __future__ import annotations

import re

import pytest
import yaml
from riverlog_operator.builders.connect_metrics import (
    COUNTER,
    RULES,
    exporter_config,
    exporter_config_text,
    metric_names,
)

pytestmark = pytest.mark.unit


def test_the_file_is_the_config_and_only_connect_is_read() -> None:
    assert yaml.safe_load(exporter_config_text()) == exporter_config()
    assert exporter_config()["includeObjectNames"] == ["kafka.connect:*", "kafka.connect.mirror:*"]


def test_rules_are_well_formed() -> None:
    names = [rule.name for rule in RULES]
    assert len(names) == len(set(names))
    for rule in RULES:
        assert re.fullmatch(r"riverlog_(connect|mirror)_[a-z_]+", rule.name), rule.name
        assert rule.name.endswith("_total") == (rule.type == COUNTER), rule.name
        groups = re.compile(rule.to_dict()["pattern"]).groups
        used = {int(n) for value in dict(rule.labels).values() for n in re.findall(r"\$(\d+)", value)}
        assert used == set(range(1, groups + 1)), f"{rule.name}: every group a label, every label a group"
        assert rule.help
    assert metric_names() == frozenset(names)


def metric_of(mbean_attribute: str) -> tuple[str, dict[str, str]] | None:
    """The first rule whose pattern matches, as the exporter picks (anchored at the start), with
    its labels filled in."""
    for rule in RULES:
        found = re.match(rule.to_dict()["pattern"], mbean_attribute)
        if found:
            return rule.name, {k: found.expand(v.replace("$", "\\")) for k, v in rule.labels}
    return None


MIRROR_PARTITION = ("kafka.connect.mirror<type=MirrorSourceConnector, source=up, target=down, topic=up.orders, "
                    "partition=2>")


@pytest.mark.parametrize(("mbean", "metric", "labels"), [
    ("kafka.connect<type=connector-metrics, connector=lines-in><>status: running",
     "riverlog_connect_connector_status", {"connector": "lines-in", "status": "running"}),
    ("kafka.connect<type=connector-metrics, connector=lines-in><>status: failed",
     "riverlog_connect_connector_status", {"connector": "lines-in", "status": "failed"}),
    ("kafka.connect<type=connector-task-metrics, connector=a.b, task=12><>status: unassigned",
     "riverlog_connect_task_status", {"connector": "a.b", "task": "12", "status": "unassigned"}),
    ("kafka.connect<type=connect-worker-metrics, connector=lines-in><>connector-failed-task-count: 1.0",
     "riverlog_connect_worker_connector_tasks", {"connector": "lines-in", "state": "failed"}),
    ("kafka.connect<type=connect-worker-metrics><>task-count: 2.0", "riverlog_connect_worker_tasks", {}),
    ("kafka.connect<type=source-task-metrics, connector=in, task=0><>source-record-write-total: 7.0",
     "riverlog_connect_source_records_written_total", {"connector": "in", "task": "0"}),
    ("kafka.connect<type=sink-task-metrics, connector=out, task=1><>sink-record-read-total: 7.0",
     "riverlog_connect_sink_records_read_total", {"connector": "out", "task": "1"}),
    (f"{MIRROR_PARTITION}<>record-age-ms: 5.0", "riverlog_mirror_record_age_seconds",
     {"source": "up", "target": "down", "topic": "up.orders", "partition": "2"}),
    # Not taken by the record-age-ms rule before it: patterns end at the attribute's name.
    (f"{MIRROR_PARTITION}<>record-age-ms-max: 9.0", "riverlog_mirror_record_age_max_seconds",
     {"source": "up", "target": "down", "topic": "up.orders", "partition": "2"}),
    (f"{MIRROR_PARTITION}<>replication-latency-ms: 3.0", "riverlog_mirror_replication_latency_seconds",
     {"source": "up", "target": "down", "topic": "up.orders", "partition": "2"}),
    ("kafka.connect.mirror<type=MirrorCheckpointConnector, source=up, target=down, group=billing, topic=orders, "
     "partition=0><>checkpoint-latency-ms: 12.0", "riverlog_mirror_checkpoint_latency_seconds",
     {"source": "up", "target": "down", "group": "billing", "topic": "orders", "partition": "0"}),
])
def test_mbeans_land_in_their_metric(mbean: str, metric: str, labels: dict[str, str]) -> None:
    assert metric_of(mbean) == (metric, labels)


@pytest.mark.parametrize("mbean", [
    f"{MIRROR_PARTITION}<>record-age-ms-avg: 4.0",  # averages: Prometheus averages itself
    f"{MIRROR_PARTITION}<>record-rate: 4.0",  # rates: rate() of the counters instead
    "kafka.connect<type=connector-metrics, connector=in><>connector-class: org.example.In",
    "kafka.connect<type=connect-worker-metrics, connector=in><>connector-total-task-count: 1.0",
])
def test_what_no_rule_takes(mbean: str) -> None:
    assert metric_of(mbean) is None


def test_seconds_not_milliseconds() -> None:
    for rule in RULES:
        if "_seconds" in rule.name:
            assert rule.value_factor == 0.001 and "-ms" in rule.pattern, rule.name
