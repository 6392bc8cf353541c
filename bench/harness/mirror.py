"""M1 and M1E (issue #19, acceptance 5): the throughput of Apache Kafka's MirrorMaker 2 copying a
pre-filled topic from one cluster to another of the same system, Riverlog to Riverlog and Kafka
to Kafka, with the same MirrorMaker 2 (Kafka 4.3.1's connect-mirror jar on the same Connect
worker) both times.

MirrorMaker 2 runs as the operator's ``Mirror`` runs it: its three connectors (source,
checkpoint, heartbeat) with the configs ``riverlog_operator.builders.mirror`` builds, on a
distributed Connect worker (``tests/support/connect.py``) whose cluster is the target. The
checkpoint and heartbeat connectors start before the measured phase (they copy no records; the
heartbeat writes one a second), the source connector's start opens it.

When is the copy done? Without exactly-once the target's end offsets of ``<alias>.<topic>`` add
up to the records on the source (no task failed, so nothing was sent twice). With exactly-once
every transaction also writes a marker to each partition it touched, so end offsets overcount;
the task's source offsets, which the worker commits in the same transaction as the records
(``exactly.once.source.support``), say instead which source record was the last one made
visible on the target. Both are polled, not consumed: reading 1 GB back would compete with the
mirror for the same two cores.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from riverlog_operator.builders.connect import Endpoint
from riverlog_operator.builders.mirror import SOURCE_CONNECTOR, mirror_connector_configs
from riverlog_operator.connect_model import KafkaEndpointSpec, MirrorClusterSpec, MirrorSpec

SOURCE_ALIAS = "source"
TARGET_ALIAS = "target"
WORKER_GROUP = "mirror"  # the Connect worker's group.id; its storage topics are named after it
OFFSETS_TOPIC = f"{WORKER_GROUP}-offsets"  # tests/support/connect.py: offset.storage.topic
# The -Xmx that Kafka's connect-distributed.sh and connect-mirror-maker.sh give a worker unless
# KAFKA_HEAP_OPTS says otherwise: eight tasks, each with a producer's 32 MiB buffer and a
# consumer's fetches, ran the tests' 384 MiB worker out of heap.
WORKER_HEAP = "2g"
POLL_S = 0.2  # how often the target is asked how far the copy is: the error of every timing

# The worker settings exactly-once needs (KIP-618): transactional source tasks.
EXACTLY_ONCE_WORKER = {"exactly.once.source.support": "enabled"}
# One broker per cluster: the transaction log (Kafka's default RF 3) must fit on it.
SINGLE_BROKER_TXN = {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
                     "transaction.state.log.num.partitions": "3"}


def remote_topic(topic: str) -> str:
    """The name MirrorMaker 2's default replication policy gives ``topic`` on the target."""
    return f"{SOURCE_ALIAS}.{topic}"


def connector_configs(source_bootstrap: str, target_bootstrap: str, topic: str, tasks: int,
                      exactly_once: bool) -> dict[str, dict[str, str]]:
    """The three connectors' configs, as the operator builds them for a Mirror of ``topic`` from
    ``source_bootstrap`` to ``target_bootstrap`` (plaintext, one broker each: replication factor 1
    for the topics MirrorMaker 2 creates). Everything else is MirrorMaker 2's default, producer
    and consumer settings included: the same for both systems, and what a user gets."""
    spec = MirrorSpec(
        source=MirrorClusterSpec(SOURCE_ALIAS, KafkaEndpointSpec(bootstrap_servers=source_bootstrap)),
        target=MirrorClusterSpec(TARGET_ALIAS, KafkaEndpointSpec(bootstrap_servers=target_bootstrap)),
        tasks_max=tasks, topics=topic, exactly_once=exactly_once,
        # Neither broker runs an authorizer: MirrorMaker 2 would only log that it cannot list ACLs.
        config={"sync.topic.acls.enabled": "false"},
    )
    return mirror_connector_configs(spec, Endpoint(source_bootstrap, replication_factor=1),
                                    Endpoint(target_bootstrap, replication_factor=1))


@dataclass(frozen=True)
class Progress:
    """Seconds from the source connector's start: ``empty_s`` the last poll that found no record
    on the target yet, ``first_s`` the first that found one, ``done_s`` the first that found them
    all. The first record arrived between ``empty_s`` and ``first_s``."""

    empty_s: float
    first_s: float
    done_s: float


def wait_for_copy(copied: Callable[[], int], total: int, start: float, timeout: float,
                  clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                  describe: Callable[[], str] = str) -> Progress:
    """Poll ``copied()`` (records on the target so far) every ``POLL_S`` until it reaches
    ``total``; times relative to ``start`` (a ``clock`` reading, taken before the connector was
    created)."""
    empty = 0.0
    first: float | None = None
    while True:
        now = clock()
        count = copied()
        if count == 0:
            empty = now - start
        elif first is None:
            first = now - start
        if count >= total:
            return Progress(empty, first if first is not None else now - start, now - start)
        if now - start > timeout:
            raise TimeoutError(f"{count} of {total} records on the target after {timeout:.0f}s\n{describe()}")
        sleep(POLL_S)


def rates(total: int, size: int, progress: Progress) -> dict[str, float]:
    """records/s and MB/s over the whole phase (connector start to last record); records/s of the
    copy alone, from the last poll that found the target empty (so a copy that one poll saw
    start and end still has a duration, and the rate is rather under- than overstated); and the
    connector's start to the first mirrored record."""
    return {
        "records_s": total / progress.done_s,
        "mb_s": total * size / 1e6 / progress.done_s,
        "copy_records_s": total / (progress.done_s - progress.empty_s) if progress.done_s > progress.empty_s else 0.0,
        "first_record_s": progress.first_s,
    }


class EndOffsets:
    """Sum of the end offsets of a topic's partitions (0 while it does not exist yet)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self._admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
        self._partitions = [TopicPartition(topic, p) for p in range(partitions)]

    def __call__(self) -> int:
        request = {tp: OffsetSpec.latest() for tp in self._partitions}
        try:
            futures = self._admin.list_offsets(request, isolation_level=IsolationLevel.READ_UNCOMMITTED,
                                               request_timeout=10)
            return sum(f.result(timeout=15).offset for f in futures.values())
        except KafkaException:  # the topic not created yet, or its leaders not known yet
            return 0


def source_offset_position(key: bytes | None, value: bytes | None, connector: str
                           ) -> tuple[int, int] | None:
    """(partition, next offset) from one record of the worker's offsets topic, or None if it is
    not a source offset of ``connector``. Connect's JSON: key ``[connector, partition map]``,
    value the offset map; MirrorMaker 2's partition map names ``cluster``, ``topic`` and
    ``partition``, its offset map the last copied source ``offset``."""
    if key is None or value is None:
        return None
    name, partition = json.loads(key)
    if name != connector or not isinstance(partition, dict) or "partition" not in partition:
        return None
    return int(partition["partition"]), int(json.loads(value)["offset"]) + 1


class CommittedSourceOffsets:
    """Exactly-once: how many source records the source connector's committed transactions
    hold, from the worker's offsets topic read committed (the worker writes the task's source
    offsets in the same transaction as the records). Needs the source's partitions to start at
    offset 0 with no gaps (one producer filled them, nothing deleted), so offset + 1 counts."""

    def __init__(self, bootstrap: str, partitions: int, connector: str = SOURCE_CONNECTOR) -> None:
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "m1-progress",
                                   "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                   "isolation.level": "read_committed", "log_level": 2})
        self._consumer.subscribe([OFFSETS_TOPIC])
        self._connector = connector
        self._next: dict[int, int] = {}
        self._partitions = partitions

    def __call__(self) -> int:
        for msg in self._consumer.consume(10_000, POLL_S):
            if msg.error() is None:
                found = source_offset_position(msg.key(), msg.value(), self._connector)
                if found is not None:
                    self._next[found[0]] = max(self._next.get(found[0], 0), found[1])
        return sum(self._next.get(p, 0) for p in range(self._partitions))

    def close(self) -> None:
        self._consumer.close()


def worker_overrides(exactly_once: bool) -> Mapping[str, Any]:
    return EXACTLY_ONCE_WORKER if exactly_once else {}


@contextlib.contextmanager
def progress_probe(target_bootstrap: str, topic: str, partitions: int, exactly_once: bool
                   ) -> Iterator[Callable[[], int]]:
    """How many of ``topic``'s records the target holds so far (see the module's docstring)."""
    if not exactly_once:
        yield EndOffsets(target_bootstrap, remote_topic(topic), partitions)
        return
    committed = CommittedSourceOffsets(target_bootstrap, partitions)
    try:
        yield committed
    finally:
        committed.close()
