"""Start and stop Riverlog or Apache Kafka, one broker or three, with identical settings.

Both systems run from the same code the test tiers use (``tests/support``): a single broker is a
:class:`BrokerProcess`, a three-node KRaft cluster a :class:`ProcessCluster` on loopback. What
could make the comparison unfair is pinned here once for both: the data directory (a folder
under one base directory, so one disk), the flush policy (no forced fsync; both rely on the page
cache and replication, Kafka's default), segment size, partitions, replication and min ISR.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Mapping
from pathlib import Path

from support.brokers import BrokerProcess, kafka_dist
from support.process_cluster import ProcessCluster

SYSTEMS = ("riverlog", "kafka")

# Long.MAX_VALUE: never fsync on a message count. log.flush.interval.ms stays unset on both,
# which means no time-based flush either (Kafka's and Riverlog's default).
NO_FORCED_FLUSH = "9223372036854775807"

COMMON_SETTINGS: dict[str, str] = {
    "log.flush.interval.messages": NO_FORCED_FLUSH,
    "log.segment.bytes": str(1 << 30),
    "auto.create.topics.enable": "false",
    # Riverlog's default is 3 s (Kafka's own default); Kafka's test properties use 0. Equal for
    # both so ConsumerPerformance's group join costs the same.
    "group.initial.rebalance.delay.ms": "0",
}

SINGLE_SETTINGS: dict[str, str] = {
    **COMMON_SETTINGS,
    "num.partitions": "8",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "3",
}

# ProcessCluster already gives both systems the same CLUSTER_DEFAULTS (RF=3, min ISR 2, quick
# failure detection); these are added on top.
CLUSTER_SETTINGS: dict[str, str] = {**COMMON_SETTINGS, "min.insync.replicas": "2"}

START_TIMEOUT = 300.0


@functools.cache
def kafka_libs() -> Path:
    """Kafka's jars from Maven Central (bench/kafka_dist.py); resolved once per run."""
    return Path(kafka_dist.install())


def _libs_for(system: str) -> Path | None:
    return kafka_libs() if system == "kafka" else None


def new_broker(system: str, workdir: Path, overrides: Mapping[str, object] | None = None) -> BrokerProcess:
    """A single broker, not started (W7 needs to time its start itself)."""
    settings = {**SINGLE_SETTINGS, **{k: str(v) for k, v in (overrides or {}).items()}}
    return BrokerProcess(workdir, target=system, overrides=settings, name=system, kafka_libs=_libs_for(system))


@contextlib.contextmanager
def single_broker(system: str, workdir: Path, overrides: Mapping[str, object] | None = None
                  ) -> Iterator[BrokerProcess]:
    broker = new_broker(system, workdir, overrides)
    try:
        broker.start(timeout=START_TIMEOUT)
        yield broker
    finally:
        # SIGKILL, as ProcessCluster tears its nodes down: the run's data is deleted next, and a
        # graceful stop (seconds for either system once it holds many partitions) measures nothing.
        broker.kill()
        broker.close()


@contextlib.contextmanager
def three_brokers(system: str, workdir: Path, overrides: Mapping[str, object] | None = None
                  ) -> Iterator[ProcessCluster]:
    settings = {**CLUSTER_SETTINGS, **{k: str(v) for k, v in (overrides or {}).items()}}
    # netns=False: every node on 127.0.0.1 with free ports (namespaces need root and add nothing
    # to a throughput comparison).
    with ProcessCluster(workdir, 3, target=system, overrides=settings, netns=False,
                        kafka_libs=_libs_for(system)) as cluster:
        yield cluster
