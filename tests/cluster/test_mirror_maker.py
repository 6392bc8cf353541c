"""Issue #19, acceptance 2: Apache Kafka's MirrorMaker 2, unchanged, as connectors on a Connect
worker of the target cluster (as the operator's ``Mirror`` runs it), from an Apache Kafka
cluster to the cluster under test and from the cluster under test to another one.

The source holds a topic with a non-default config; more records are produced while the mirror
runs, and the Connect worker is killed with -9 and restarted in between; then a consumer group
commits on the source close to the end of each partition (caught up on one), as consumers do up
to the moment they are moved. Then:

- the target has the topic (``<alias>.orders``, MM2's default replication policy) with the
  source's partition count and its non-default config, and every source record, partition by
  partition in source order (at least once; with exactly-once, each exactly once, read with
  read_committed);
- the group's offsets were translated onto the target; a consumer of the group that moves to the
  target skips nothing; where the group was caught up it re-reads at most ``offset.lag.max``
  records (MM2 emits an offset sync at least that often), where it lagged it re-reads back to
  the nearest offset sync MM2 still keeps (it thins them out exponentially with their distance
  from the newest), never from the beginning (docs/migration.md).

The worker runs with the Prometheus JMX exporter's agent and the operator's rules
(``builders/connect_metrics.py``): its metrics show the three connectors running, record age and
replication latency for every mirrored partition, and checkpoint latency for the group.

``RIVERLOG_TEST_TARGET=kafka`` runs the same code with Apache Kafka as every cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from support.brokers import free_ports, kafka_dist
from support.clients import wait_until
from support.cluster_workload import create_topic
from support.connect import ConnectWorker, series
from support.process_cluster import ProcessCluster
from support.txn_checks import READ_COMMITTED, READ_UNCOMMITTED, read_all

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(480)]

TOPIC, GROUP, PARTITIONS = "orders", "billing", 3
FIRST, SECOND = 3000, 3000  # records produced before the mirror starts, and while it runs
BEHIND = {0: 0, 1: 40, 2: 0}  # where the group commits on the source: records before each end
LAG_MAX = 10  # offset.lag.max: how far apart MM2 emits offset syncs
RETENTION_MS = "7200000"  # a non-default topic config the mirror must carry over
WAIT = 180.0
MM2 = "org.apache.kafka.connect.mirror"
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"


def wait_for(check: Callable[[], object], timeout: float, what: str, interval: float = 1.0) -> None:
    wait_until(check, timeout=timeout, interval=interval, message=f"waiting for {what}")


def produce(bootstrap: str, start: int, count: int, pace: float = 0.0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(start, start + count):
        producer.produce(TOPIC, key=str(i).encode(), value=f"order-{i:05d}".encode(), partition=i % PARTITIONS)
        if pace and i % 100 == 0:
            producer.flush(30)
            time.sleep(pace)
    assert producer.flush(60) == 0


def mirror_connectors(source: str, target: str, alias: str, exactly_once: bool) -> dict[str, dict[str, object]]:
    common: dict[str, object] = {
        "source.cluster.alias": alias, "target.cluster.alias": "target",
        "source.cluster.bootstrap.servers": source, "target.cluster.bootstrap.servers": target,
        "key.converter": BYTES, "value.converter": BYTES, "header.converter": BYTES,
        "tasks.max": 1,
    }
    source_connector: dict[str, object] = {
        **common, "connector.class": f"{MM2}.MirrorSourceConnector", "topics": TOPIC,
        "replication.factor": 1, "offset-syncs.topic.replication.factor": 1, "sync.topic.acls.enabled": "false",
        "refresh.topics.interval.seconds": 5, "sync.topic.configs.interval.seconds": 5,
        "offset.lag.max": LAG_MAX,
    }
    if exactly_once:
        source_connector.update({"exactly.once.support": "required",
                                 "source.consumer.isolation.level": "read_committed"})
    return {
        "mirror-source": source_connector,
        "mirror-checkpoint": {
            **common, "connector.class": f"{MM2}.MirrorCheckpointConnector", "groups": GROUP,
            "checkpoints.topic.replication.factor": 1, "emit.checkpoints.interval.seconds": 1,
            "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": 1,
            "refresh.groups.interval.seconds": 5,
        },
        "mirror-heartbeat": {
            **common, "connector.class": f"{MM2}.MirrorHeartbeatConnector",
            "heartbeats.topic.replication.factor": 1, "emit.heartbeats.interval.seconds": 1,
        },
    }


def committed_on(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


@pytest.fixture
def workers() -> Iterator[list[ConnectWorker]]:
    """Filled by the test; every worker is killed at the end."""
    started: list[ConnectWorker] = []
    yield started
    for worker in started:
        worker.kill()


CASES = [("from_kafka", "kafka", False), ("between_targets", None, True)]


@pytest.mark.parametrize(("case", "source_target", "exactly_once"), CASES, ids=[c[0] for c in CASES])
def test_mirror_maker_2_mirrors_topics_records_and_group_offsets(
        case: str, source_target: str | None, exactly_once: bool,
        process_cluster_factory: Callable[..., ProcessCluster], workers: list[ConnectWorker],
        attach_log: Callable[[str, Callable[[], str]], None], tmp_path: Path) -> None:
    source = process_cluster_factory(1, netns=False, target=source_target,
                                     overrides={"offsets.topic.replication.factor": 1,
                                                "transaction.state.log.replication.factor": 1,
                                                "transaction.state.log.min.isr": 1})
    target = process_cluster_factory(1, netns=False, overrides={
        "offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1})
    alias = "source"
    mirrored = f"{alias}.{TOPIC}"
    create_topic(source, TOPIC, partitions=PARTITIONS, replication=1, config={"retention.ms": RETENTION_MS})
    produce(source.bootstrap, 0, FIRST)

    libs = Path(kafka_dist.install())
    port, metrics_port = free_ports(2)
    worker = ConnectWorker(libs, tmp_path, "mirror-worker", target.bootstrap, port, group_id="mirror",
                           replication_factor=1, metrics_port=metrics_port,
                           overrides={"exactly.once.source.support": "enabled"} if exactly_once else {})
    workers.append(worker)
    attach_log("Connect worker", lambda: worker.log_tail(150))
    worker.start()
    for name, config in mirror_connectors(source.bootstrap, target.bootstrap, alias, exactly_once).items():
        worker.rest.put_connector(name, config)
    for name, tasks in (("mirror-source", 1), ("mirror-checkpoint", None), ("mirror-heartbeat", 1)):
        wait_for(lambda name=name, tasks=tasks: worker.rest.running(name, tasks), WAIT, f"{name} running")

    # More records while the mirror runs, its worker killed with -9 and restarted meanwhile.
    produce(source.bootstrap, FIRST, SECOND // 2, pace=0.05)
    worker.kill()
    produce(source.bootstrap, FIRST + SECOND // 2, SECOND // 2, pace=0.05)
    worker.start()

    isolation = READ_COMMITTED if exactly_once else READ_UNCOMMITTED
    expected = {p: [f"order-{i:05d}" for i in range(FIRST + SECOND) if i % PARTITIONS == p] for p in range(PARTITIONS)}

    def mirrored_values() -> dict[int, list[str | None]]:
        try:
            got = read_all(target.bootstrap, {mirrored: PARTITIONS}, isolation, timeout=30)
        except Exception:  # the topic not there yet, or still being created
            return {}
        return {p: got.values(mirrored, p) for p in range(PARTITIONS)}

    wait_for(lambda: all(set(expected[p]) <= set(mirrored_values().get(p, [])) for p in range(PARTITIONS)), WAIT,
             f"every record in {mirrored} on the target", interval=2.0)
    values = mirrored_values()
    for p in range(PARTITIONS):
        # Re-sent records (after the worker's death) may repeat; first appearances keep order.
        first_seen: list[str] = []
        seen: set[str] = set()
        for v in values[p]:
            assert v is not None
            if v not in seen:
                seen.add(v)
                first_seen.append(v)
        assert first_seen == expected[p], f"partition {p} out of source order"
        if exactly_once:
            assert values[p] == expected[p], f"partition {p}: duplicates or gaps with exactly-once"
    duplicates = sum(len(values[p]) - len(expected[p]) for p in range(PARTITIONS))

    # The mirror's lag in the worker's metrics (since its restart): every partition of the remote
    # topic has a record age and a replication latency, and replicated records; the three
    # connectors are running (a checkpoint connector without groups yet may have no task).
    def mirror_metrics() -> bool:
        samples = worker.scrape()
        wanted = {(alias, "target", mirrored, str(p)) for p in range(PARTITIONS)}
        for name in ("riverlog_mirror_record_age_seconds", "riverlog_mirror_replication_latency_seconds",
                     "riverlog_mirror_records_total"):
            found = {(labels["source"], labels["target"], labels["topic"], labels["partition"]): value
                     for labels, value in series(samples, name)}
            assert set(found) == wanted, (name, found)
            assert all(value >= 0 for value in found.values()), (name, found)
            if name == "riverlog_mirror_records_total" and not all(found.values()):
                return False
        running = {labels["connector"] for labels, value in series(samples, "riverlog_connect_connector_status")
                   if labels["status"] == "running" and value == 1}
        return running == {"mirror-source", "mirror-checkpoint", "mirror-heartbeat"}

    wait_for(mirror_metrics, 30, "the mirror's record age and replication latency in the worker's metrics")

    # The topic's shape and its non-default config came across.
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    assert len(admin.list_topics(mirrored, timeout=10).topics[mirrored].partitions) == PARTITIONS
    resource = ConfigResource(ConfigResource.Type.TOPIC, mirrored)
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    assert configs["retention.ms"].value == RETENTION_MS

    # The group, caught up or nearly, commits on the source; its offsets are translated onto
    # the target (the checkpoint connector, every second); then the group moves there.
    ends = {p: len(expected[p]) for p in range(PARTITIONS)}
    committed = {p: ends[p] - BEHIND[p] for p in range(PARTITIONS)}
    committer = Consumer({"bootstrap.servers": source.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    committer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in committed.items()], asynchronous=False)
    committer.close()
    wait_for(lambda: len(committed_on(target.bootstrap, mirrored)) == PARTITIONS, WAIT,
             "the group's offsets translated onto the target")
    steady: list[dict[int, int]] = []

    def settled() -> bool:  # the same translation twice, 3 checkpoint intervals apart
        steady.append(committed_on(target.bootstrap, mirrored))
        return len(steady) > 1 and steady[-1] == steady[-2]

    wait_for(settled, WAIT, "the translated offsets to settle", interval=3.0)
    translated = steady[-1]

    def checkpoint_latency() -> list[dict[str, str]]:
        return [labels for labels, _ in series(worker.scrape(), "riverlog_mirror_checkpoint_latency_seconds")
                if (labels["source"], labels["target"], labels["group"]) == (alias, "target", GROUP)]

    wait_for(checkpoint_latency, 30, f"checkpoint latency of group {GROUP} in the worker's metrics")
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "enable.partition.eof": True,
                         "isolation.level": "read_committed" if exactly_once else "read_uncommitted"})
    consumer.subscribe([mirrored])
    read: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    ends: set[int] = set()
    deadline = time.monotonic() + 60
    while len(ends) < PARTITIONS and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == -191:  # partition EOF
                ends.add(msg.partition())
            continue
        read[msg.partition()].append(msg.value().decode())
    consumer.close()
    assert ends == set(range(PARTITIONS)), "the moved consumer did not reach the end"
    reread = {}
    for p in range(PARTITIONS):
        position = committed[p]  # source offset == index in expected[p] (one producer, no aborts)
        got = set(read[p])
        assert set(expected[p][position:]) <= got, f"partition {p}: the moved consumer skipped records"
        reread[p] = len(got & set(expected[p][:position]))
        if BEHIND[p] == 0:
            assert reread[p] <= LAG_MAX, f"partition {p}: caught up, yet re-read {reread[p]} records"
        else:  # translated from a retained offset sync, not reset to the beginning
            assert reread[p] < position, f"partition {p}: re-read everything before the committed offset"
    print(f"{case}: {sum(len(v) for v in values.values())} records mirrored ({duplicates} duplicates); "
          f"group offsets source {committed} -> target {translated}; re-read per partition {reread}")
