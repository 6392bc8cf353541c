"""Issue #19, acceptance 1: Apache Kafka's Connect runtime in distributed mode, unchanged, on a
3-broker cluster.

Two worker JVMs form one Connect cluster (the ``connect`` group protocol, incremental cooperative
rebalancing, compacted config/offset/status topics they create and check). The FileStream
source connector tails a file that grows to 100,000 lines while it runs; the FileStream sink
connector writes the topic back to a file. Mid-run the worker running the source task is killed
with -9 (its tasks move to the other worker), later a broker is killed with -9 and restarted.
The checks, from what the topic and the sink file hold at the end:

- at least once (default): every line is in the topic and in the sink file; per partition the
  sink file has the records in offset order (a record re-delivered after the worker's death may
  repeat, earlier records are never written after later ones);
- with ``exactly.once.source.support=enabled`` (KIP-618: a transactional producer per source
  task, zombies fenced): every line is in the topic exactly once, read with read_committed.

The workers run with the Prometheus JMX exporter's agent and the operator's rules
(``builders/connect_metrics.py``): scraped, they show both connectors and their tasks running,
each once over the two workers, and records through the source and the sink tasks.

Runs against Riverlog and, with ``RIVERLOG_TEST_TARGET=kafka``, Apache Kafka with the same code.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.brokers import free_ports, kafka_dist
from support.clients import wait_until
from support.cluster_workload import create_topic
from support.connect import FILE_SINK, FILE_SOURCE, ConnectRest, ConnectWorker, Sample, series
from support.process_cluster import ProcessCluster
from support.txn_checks import READ_COMMITTED, READ_UNCOMMITTED, read_all

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

LINES = 100_000
CHUNKS = 20  # the source file grows by LINES / CHUNKS lines at a time
CHUNK_PAUSE = 0.5
TOPIC = "connect-lines"
PARTITIONS = 3
WAIT = 240.0


def line(i: int) -> str:
    return f"line-{i:06d}"


def wait_for(check: Callable[[], object], timeout: float, what: str, interval: float = 1.0) -> None:
    wait_until(check, timeout=timeout, interval=interval, message=f"waiting for {what}")


@pytest.fixture
def workers(attach_log: Callable[[str, Callable[[], str]], None]) -> Iterator[list[ConnectWorker]]:
    """Filled by the test (``add``); every worker is killed at the end, its log in a failure's
    report."""
    started: list[ConnectWorker] = []

    class Workers(list[ConnectWorker]):
        def append(self, worker: ConnectWorker) -> None:
            super().append(worker)
            started.append(worker)
            attach_log(f"Connect worker {worker.name}", lambda: worker.log_tail(150))

    yield Workers()
    for worker in started:
        worker.kill()


# Each connector and task once over the workers (its MBean is on the worker that runs it).
RUNNING = {("connector", "lines-in", "running"), ("connector", "lines-out", "running"),
           ("task", "lines-in/0", "running"), ("task", "lines-out/0", "running")}


def states_scraped(workers: list[ConnectWorker]) -> set[tuple[str, str, str]] | None:
    """The connector and task states the workers' metrics show (None while one appears twice or
    a worker's count of connectors disagrees)."""
    scraped: list[dict[Sample, float]] = [w.scrape() for w in workers]
    found: list[tuple[str, str, str]] = []
    for samples in scraped:
        found += [("connector", labels["connector"], labels["status"])
                  for labels, value in series(samples, "riverlog_connect_connector_status") if value == 1]
        found += [("task", f"{labels['connector']}/{labels['task']}", labels["status"])
                  for labels, value in series(samples, "riverlog_connect_task_status") if value == 1]
    connectors = sum(v for s in scraped for _, v in series(s, "riverlog_connect_worker_connectors"))
    tasks = sum(v for s in scraped for _, v in series(s, "riverlog_connect_worker_tasks"))
    running_tasks = sum(v for s in scraped for labels, v in series(s, "riverlog_connect_worker_connector_tasks")
                        if labels["state"] == "running")
    if len(found) != len(set(found)) or (connectors, tasks, running_tasks) != (2, 2, 2):
        return None
    return set(found)


def records_scraped(workers: list[ConnectWorker]) -> tuple[float, float]:
    """Records the source task wrote and the sink task read, over the workers' metrics."""
    scraped = [w.scrape() for w in workers]
    written = sum(v for s in scraped for labels, v in series(s, "riverlog_connect_source_records_written_total")
                  if labels["connector"] == "lines-in")
    read = sum(v for s in scraped for labels, v in series(s, "riverlog_connect_sink_records_read_total")
               if labels["connector"] == "lines-out")
    return written, read


def task_workers(rest: ConnectRest, name: str) -> list[str]:
    return [t["worker_id"] for t in rest.status(name).get("tasks", [])]


def all_tasks_on(worker: ConnectWorker, connectors: tuple[str, ...]) -> bool:
    """Every connector's single task RUNNING on ``worker``."""
    if not all(worker.rest.running(name, 1) for name in connectors):
        return False
    return {w for name in connectors for w in task_workers(worker.rest, name)} == {f"127.0.0.1:{worker.rest_port}"}


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_file_source_and_sink_survive_a_worker_and_a_broker_killed(
        guarantee: str, process_cluster_factory: Callable[..., ProcessCluster], workers: list[ConnectWorker],
        tmp_path: Path) -> None:
    cluster = process_cluster_factory(3, netns=False, overrides={
        # Transactions of the killed worker's task producer are aborted soon after its timeout.
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 2000})
    create_topic(cluster, TOPIC, partitions=PARTITIONS, replication=3, config={"min.insync.replicas": "2"})
    libs = Path(kafka_dist.install())
    exactly_once = guarantee == "exactly_once"
    overrides: dict[str, object] = {"exactly.once.source.support": "enabled"} if exactly_once else {}
    ports = free_ports(4)
    for n, (port, metrics_port) in enumerate(zip(ports[:2], ports[2:], strict=True)):
        workers.append(ConnectWorker(libs, tmp_path, f"worker{n}", cluster.bootstrap, port,
                                     group_id=f"connect-{guarantee.replace('_', '-')}", overrides=overrides,
                                     metrics_port=metrics_port))
    for worker in workers:
        worker.start()

    source_file, sink_file = tmp_path / "source.txt", tmp_path / "sink.txt"
    source_file.write_text("")
    source_config: dict[str, object] = {"connector.class": FILE_SOURCE, "tasks.max": 1, "file": source_file,
                                        "topic": TOPIC, "batch.size": 500}
    if exactly_once:
        source_config.update({"exactly.once.support": "required", "transaction.boundary": "poll"})
    rest = workers[0].rest
    rest.put_connector("lines-in", source_config)
    rest.put_connector("lines-out", {"connector.class": FILE_SINK, "tasks.max": 1, "file": sink_file,
                                     "topics": TOPIC})
    for name in ("lines-in", "lines-out"):
        wait_for(lambda name=name: rest.running(name, 1), WAIT, f"{name} running")
    wait_for(lambda: states_scraped(workers) == RUNNING, 30, "both connectors and tasks running in the metrics")

    def sink_lines() -> list[str]:
        return sink_file.read_text().splitlines() if sink_file.exists() else []

    written = 0
    per_chunk = LINES // CHUNKS
    victim: ConnectWorker | None = None
    for chunk in range(CHUNKS):
        with source_file.open("a") as f:
            f.write("".join(line(i) + "\n" for i in range(written, written + per_chunk)))
        written += per_chunk
        if chunk == CHUNKS // 4:
            # The worker running the source task dies; the survivor takes over its tasks.
            wait_for(lambda: len(sink_lines()) > 0, WAIT, "the first lines in the sink file")
            # Records through both tasks in the metrics, before a kill moves them (a task's totals
            # start again from zero where it restarts).
            wait_for(lambda: min(records_scraped(workers)) > 0, 30, "records through the tasks in the metrics")
            host = task_workers(rest, "lines-in")[0]
            victim = next(w for w in workers if host.endswith(f":{w.rest_port}"))
            survivor = next(w for w in workers if w is not victim)
            victim.kill()
            wait_for(lambda survivor=survivor: all_tasks_on(survivor, ("lines-in", "lines-out")), WAIT,
                     "every task on the surviving worker")
            rest = survivor.rest
        if chunk == CHUNKS // 2:
            broker = cluster.nodes[1]
            broker.kill()
            time.sleep(3)
            broker.restart()
        time.sleep(CHUNK_PAUSE)
    assert victim is not None
    victim.start()  # back into the group; the tasks may move again

    wanted = {line(i) for i in range(LINES)}
    wait_for(lambda: set(sink_lines()) >= wanted, WAIT, f"all {LINES} lines in the sink file", interval=2.0)

    isolation = READ_COMMITTED if exactly_once else READ_UNCOMMITTED
    topic = read_all(cluster.bootstrap, {TOPIC: PARTITIONS}, isolation, timeout=120)
    values = [r.value for r in topic.records]
    assert set(values) == wanted  # every line, nothing else
    duplicates = len(values) - len(set(values))
    print(f"{guarantee}: {len(values)} records in the topic for {LINES} lines ({duplicates} duplicates); "
          f"sink file {len(sink_lines())} lines")
    if exactly_once:
        assert duplicates == 0
    # After the kills and restarts: every connector and task running again, each once.
    wait_for(lambda: states_scraped(list(workers)) == RUNNING, 60, "the metrics to show everything running again")

    # Per partition, the sink file holds the records in offset order: a record's first
    # appearance never comes after the first appearance of a later record of its partition.
    # Lines the source sent twice into different partitions are left out (ambiguous).
    partitions_of: dict[str, set[int]] = defaultdict(set)
    offset_of: dict[str, int] = {}
    for r in topic.records:
        assert r.value is not None
        partitions_of[r.value].add(r.partition)
        offset_of.setdefault(r.value, r.offset)
    seen: set[str] = set()
    last: dict[int, int] = {}
    out_of_order = []
    for text in sink_lines():
        if text in seen or len(partitions_of[text]) != 1:
            continue
        seen.add(text)
        (partition,) = partitions_of[text]
        if offset_of[text] < last.get(partition, -1):
            out_of_order.append((text, partition, offset_of[text], last[partition]))
        last[partition] = max(last.get(partition, -1), offset_of[text])
    assert out_of_order == [], out_of_order[:5]
