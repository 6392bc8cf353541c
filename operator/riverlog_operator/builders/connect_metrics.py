"""Prometheus metrics of Connect workers (issue #19): the Prometheus JMX exporter's Java agent
(in the Connect image, enabled by ``scripts/riverlog-connect`` when ``RIVERLOG_CONNECT_METRICS_PORT``
is set) and the rules that turn Connect's and MirrorMaker 2's MBeans into Riverlog's metric names.

Pure: the rules are data, ``exporter_config_text`` the file the agent reads (a key of the
workers' ConfigMap, ``builders/connect.py``). The tests run real workers with the same text.

MBeans, as Kafka 4.3's ``ConnectMetricsRegistry``, ``MirrorSourceMetrics`` and
``MirrorCheckpointMetrics`` register them through ``JmxReporter`` (the exporter sees
``domain<key=value, ...><>attribute``, the keys in the order Kafka adds its tags):

- ``kafka.connect:type=connector-metrics,connector=C``: ``status`` is a string (unassigned,
  running, paused, stopped, failed, restarting); the exporter matches string attributes as
  ``status: <value>``, so the state becomes a label of a gauge that is always 1. A connector's
  MBean exists on the worker that runs it only, so a sum over workers counts each connector once.
- ``kafka.connect:type=connector-task-metrics,connector=C,task=N``: ``status`` likewise.
- ``kafka.connect:type=connect-worker-metrics``: ``connector-count``, ``task-count``, startup
  failures; with ``connector=C``: ``connector-<state>-task-count`` per state.
- ``kafka.connect:type=source-task-metrics`` / ``sink-task-metrics`` (connector, task): record
  totals (counters: rates are PromQL's ``rate``, not Kafka's windowed averages).
- ``kafka.connect.mirror:type=MirrorSourceConnector,source=S,target=T,topic=X,partition=N``
  (``topic`` is the remote topic's name on the target): record age and replication latency
  (milliseconds, exported in seconds), byte and record counts.
- ``kafka.connect.mirror:type=MirrorCheckpointConnector,source,target,group,topic,partition``:
  checkpoint latency.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

# scripts/riverlog-connect starts the agent when METRICS_PORT_ENV is set ([host:]port), with the
# rules file METRICS_CONFIG_ENV names.
METRICS_PORT_ENV = "RIVERLOG_CONNECT_METRICS_PORT"
METRICS_CONFIG_ENV = "RIVERLOG_CONNECT_METRICS_CONFIG"
METRICS_CONFIG_FILE = "metrics.yaml"
# The connector and task states Connect reports (ConnectMetricsRegistry's status documentation).
STATES = ("unassigned", "running", "paused", "stopped", "failed", "restarting")

GAUGE = "GAUGE"
COUNTER = "COUNTER"
_MS = 0.001  # milliseconds to seconds, Prometheus' unit of time

_END = "(?:: .*)?$"  # see Rule.to_dict
_CONNECT = "kafka.connect"
_MIRROR = "kafka.connect.mirror"
_TASK = r"connector=(.+), task=(\d+)"
_TASK_LABELS = {"connector": "$1", "task": "$2"}
_PARTITION = r"source=(.+), target=(.+), topic=(.+), partition=(\d+)"
_PARTITION_LABELS = {"source": "$1", "target": "$2", "topic": "$3", "partition": "$4"}


@dataclass(frozen=True)
class Rule:
    """One exporter rule: attributes matching ``pattern`` become samples of ``name``."""

    name: str
    type: str
    help: str
    pattern: str
    labels: tuple[tuple[str, str], ...] = ()
    value: str | None = None  # a constant (for string attributes) instead of the attribute's value
    value_factor: float | None = None

    @property
    def exported(self) -> str:
        """The sample name Prometheus stores (the agent adds ``_total`` to counters)."""
        return self.name if self.type != COUNTER or self.name.endswith("_total") else self.name + "_total"

    def to_dict(self) -> dict[str, Any]:
        # The exporter matches "<bean><>attribute: value" and anchors a pattern at its start only:
        # without the end, record-age-ms would match record-age-ms-max and -avg too.
        out: dict[str, Any] = {"pattern": self.pattern + _END, "name": self.name, "type": self.type,
                               "help": self.help}
        if self.labels:
            out["labels"] = dict(self.labels)
        if self.value is not None:
            out["value"] = self.value
        if self.value_factor is not None:
            out["valueFactor"] = self.value_factor
        return out


def _labels(**labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(labels.items())


def _worker(group: str, attribute: str, name: str, type_: str, help_: str) -> Rule:
    """One of the worker's own metrics (no labels: one worker a scrape target)."""
    return Rule(name, type_, help_, rf"{_CONNECT}<type={group}><>{attribute}")


def _task_total(group: str, attribute: str, name: str, help_: str) -> Rule:
    """A per-task counter of a task metrics group (labels connector and task)."""
    return Rule(name, COUNTER, help_, rf"{_CONNECT}<type={group}, {_TASK}><>{attribute}", tuple(_TASK_LABELS.items()))


def _mirror_partition(attribute: str, name: str, type_: str, help_: str, factor: float | None = None) -> Rule:
    return Rule(name, type_, help_, f"{_MIRROR}<type=MirrorSourceConnector, {_PARTITION}><>{attribute}",
                tuple(_PARTITION_LABELS.items()), value_factor=factor)


RULES: tuple[Rule, ...] = (
    # --- connector and task states (string attributes: one series per state, value 1) ---------
    Rule("riverlog_connect_connector_status", GAUGE,
         "1 for the connector's current state (label status), on the worker running it",
         rf"{_CONNECT}<type=connector-metrics, connector=(.+)><>status: ([a-z]+)",
         _labels(connector="$1", status="$2"), value="1"),
    Rule("riverlog_connect_task_status", GAUGE, "1 for the task's current state (label status), on its worker",
         rf"{_CONNECT}<type=connector-task-metrics, {_TASK}><>status: ([a-z]+)",
         _labels(connector="$1", task="$2", status="$3"), value="1"),
    # --- the worker -------------------------------------------------------------------------
    Rule("riverlog_connect_worker_connector_tasks", GAUGE, "Tasks of a connector on this worker, by state",
         rf"{_CONNECT}<type=connect-worker-metrics, connector=(.+)><>connector-({'|'.join(STATES)}|destroyed)"
         r"-task-count", _labels(connector="$1", state="$2")),
    _worker("connect-worker-metrics", "connector-count", "riverlog_connect_worker_connectors", GAUGE,
            "Connectors this worker runs"),
    _worker("connect-worker-metrics", "task-count", "riverlog_connect_worker_tasks", GAUGE, "Tasks this worker runs"),
    _worker("connect-worker-metrics", "connector-startup-failure-total",
            "riverlog_connect_worker_connector_startup_failures_total", COUNTER, "Connector starts that failed"),
    _worker("connect-worker-metrics", "task-startup-failure-total",
            "riverlog_connect_worker_task_startup_failures_total", COUNTER, "Task starts that failed"),
    _worker("connect-worker-rebalance-metrics", "rebalancing", "riverlog_connect_worker_rebalancing", GAUGE,
            "1 while the worker's group rebalances"),
    _worker("connect-worker-rebalance-metrics", "completed-rebalances-total",
            "riverlog_connect_worker_rebalances_total", COUNTER, "Rebalances this worker completed"),
    # --- records through tasks (reset when a task restarts; rate() copes) --------------------
    _task_total("source-task-metrics", "source-record-poll-total", "riverlog_connect_source_records_polled_total",
                "Records a source task polled, before transformations"),
    _task_total("source-task-metrics", "source-record-write-total", "riverlog_connect_source_records_written_total",
                "Records a source task wrote to Kafka, after transformations"),
    _task_total("sink-task-metrics", "sink-record-read-total", "riverlog_connect_sink_records_read_total",
                "Records a sink task read from Kafka"),
    _task_total("sink-task-metrics", "sink-record-send-total", "riverlog_connect_sink_records_sent_total",
                "Records a sink task put to its sink, after transformations"),
    _task_total("task-error-metrics", "total-record-errors", "riverlog_connect_task_record_errors_total",
                "Records a task failed to convert or transform"),
    _task_total("task-error-metrics", "total-records-skipped", "riverlog_connect_task_records_skipped_total",
                "Records a task skipped (errors.tolerance=all)"),
    # --- MirrorMaker 2, per replicated partition (topic: the remote topic on the target) -------
    # Age and latency: the last record's (a Value), and the maximum over the last sample window
    # (metrics.sample.window.ms x samples, about a minute; NaN when nothing was replicated in it,
    # so an idle topic's last old record does not look like lag forever).
    _mirror_partition("record-age-ms", "riverlog_mirror_record_age_seconds", GAUGE,
                      "Age of the last replicated record when MirrorMaker 2 read it from the source", _MS),
    _mirror_partition("record-age-ms-max", "riverlog_mirror_record_age_max_seconds", GAUGE,
                      "Largest age of a replicated record in the last sample window (NaN if none)", _MS),
    _mirror_partition("replication-latency-ms", "riverlog_mirror_replication_latency_seconds", GAUGE,
                      "From the last record's timestamp to its write on the target being acknowledged", _MS),
    _mirror_partition("replication-latency-ms-max", "riverlog_mirror_replication_latency_max_seconds", GAUGE,
                      "Largest replication latency in the last sample window (NaN if none)", _MS),
    _mirror_partition("record-count", "riverlog_mirror_records_total", COUNTER, "Records replicated"),
    _mirror_partition("byte-count", "riverlog_mirror_bytes_total", COUNTER, "Bytes replicated"),
    Rule("riverlog_mirror_checkpoint_latency_seconds", GAUGE,
         "From a group's offset commit on the source to its checkpoint (translated offset) on the target",
         rf"{_MIRROR}<type=MirrorCheckpointConnector, source=(.+), target=(.+), group=(.+), topic=(.+), "
         r"partition=(\d+)><>checkpoint-latency-ms",
         _labels(source="$1", target="$2", group="$3", topic="$4", partition="$5"), value_factor=_MS),
)

# What the agent reads: nothing outside Connect's and MirrorMaker 2's domains (the workers'
# Kafka clients register many more MBeans, scraped by nobody), and only attributes a rule matches
# (with rules, unmatched attributes are not exported). The agent adds the JVM's own metrics
# (jvm_*, process_*).
INCLUDE_OBJECT_NAMES = (f"{_CONNECT}:*", f"{_MIRROR}:*")


def exporter_config() -> dict[str, Any]:
    return {"includeObjectNames": list(INCLUDE_OBJECT_NAMES), "rules": [rule.to_dict() for rule in RULES]}


def exporter_config_text() -> str:
    return ("# Prometheus JMX exporter rules for Riverlog's Connect workers; generated by the Riverlog operator.\n"
            + yaml.safe_dump(exporter_config(), sort_keys=False, width=1000))


def metric_names() -> frozenset[str]:
    """Every sample name the rules export (the dashboard and alerts may read these)."""
    return frozenset(rule.exported for rule in RULES)
