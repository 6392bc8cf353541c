"""W1–W8 of issue #8, W9–W11 and the OMB-style O16x1, O16x4, O100x1, O100x4 of issue #15, W12 of
issue #16 (transactions), M1 and M1E of issue #19 (MirrorMaker 2), SR1, SR1I and SR2 of issue #20
(the schema registry). Each
workload runs one measurement against one system and returns its values; the runner alternates
systems and repeats rounds. A workload may prepare state once per system (W7's 10 GB log) that
its rounds then reuse.

Every workload also reports its brokers' resources (``resources.Meter`` around its measured
phase): CPU-seconds per GB moved, or CPU-seconds where it moves no bytes (W6, W7, W8), and the
peak and median resident memory of the broker process tree (the sum over a cluster's nodes)."""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import clients, latency, mirror, omb, perftools, rebalance, registry, resources, serde, share, systems, txn
from harness import secure as secure_harness
from harness.metrics import (
    AT_LEAST_KAFKA,
    HALF_KAFKA_CPU,
    Goal,
    Metric,
    perf_cpu_metric,
    resource_metrics,
)
from harness.scale import Scale

TOPIC = "bench"
PARTITIONS = 8
Values = dict[str, float]


@dataclass
class Workload:
    key: str
    title: str
    metrics: list[Metric] = field(default_factory=list)
    # The systems it can run on, when not every one (SR1I: a registry inside the broker is
    # Riverlog's alone); the runner skips the others and their column stays empty.
    only_systems: tuple[str, ...] = ()

    def runs_on(self, system: str) -> bool:
        return not self.only_systems or system in self.only_systems

    def prepare(self, system: str, workdir: Path, scale: Scale) -> Any:
        """State shared by all rounds of one system (default: none)."""
        return None

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        raise NotImplementedError

    def cleanup(self, state: Any) -> None:
        """Undo :meth:`prepare`."""


def _mb(records: int, size: int, seconds: float) -> float:
    return records * size / 1e6 / seconds


def _meter(*processes: Any) -> resources.Meter:
    """A meter of the given brokers (a BrokerProcess, or every node of a cluster), whose pids it
    reads at every sample: a broker that starts or dies during the phase is followed."""
    return resources.Meter(lambda: [p.pid for p in processes if p.running])


class W1(Workload):
    """W1, and W1S: the same over a SASL_SSL listener (SCRAM-SHA-512; harness/secure.py)."""

    def __init__(self, secure: bool = False) -> None:
        title = "produce 1 KiB, 1 broker, 8 partitions, linger 5 ms, acks=1"
        super().__init__("W1S" if secure else "W1", f"{title}, over SASL_SSL" if secure else title, [
            Metric("records_s", "records/s (librdkafka)", "records/s", True, AT_LEAST_KAFKA),
            Metric("mb_s", "MB/s (librdkafka)", "MB/s", True),
            Metric("perf_records_s", "records/s (ProducerPerformance)", "records/s", True, AT_LEAST_KAFKA),
            *resource_metrics(), perf_cpu_metric("ProducerPerformance"),
        ])
        self.secure = secure

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        n, size = scale.w1_records, scale.record_bytes
        with _broker(system, workdir, self.secure) as (broker, bootstrap, conf, java_config):
            clients.create_topics(broker.bootstrap, {TOPIC: PARTITIONS, "perf": PARTITIONS})
            with _meter(broker) as meter:
                seconds = clients.produce(bootstrap, TOPIC, n, size, linger_ms=5, acks="1", conf=conf)
                cpu = meter.lap()
                perf = perftools.producer_perf(bootstrap, "perf", n, size, linger_ms=5, acks="1",
                                               command_config=java_config)
                perf_cpu = meter.lap()
        return {"records_s": n / seconds, "mb_s": _mb(n, size, seconds), "perf_records_s": perf,
                **meter.values(n * size, cpu), "perf_cpu_s_per_gb": resources.per_gb(perf_cpu, n * size)}


@contextlib.contextmanager
def _broker(system: str, workdir: Path, secure: bool
            ) -> Iterator[tuple[Any, str, dict[str, str] | None, Path | None]]:
    """A single broker and how its measured clients reach it: (broker, bootstrap, librdkafka
    settings, Java client properties), the SASL_SSL listener's when ``secure``. Setup (topics,
    W3's writes) uses the broker's plaintext listener either way."""
    if secure:
        with secure_harness.secured_single_broker(system, workdir) as secured:
            yield secured.broker, secured.bootstrap, secured.conf, secured.java_config
    else:
        with systems.single_broker(system, workdir) as broker:
            yield broker, broker.bootstrap, None, None


class W2(Workload):
    def __init__(self) -> None:
        super().__init__("W2", "produce 1 KiB, 3 brokers, RF=3, acks=all, min ISR 2", [
            Metric("records_s", "records/s (librdkafka)", "records/s", True, AT_LEAST_KAFKA),
            Metric("mb_s", "MB/s (librdkafka)", "MB/s", True),
            *resource_metrics(),
        ])

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        from support.cluster_workload import create_topic

        n, size = scale.w2_records, scale.record_bytes
        with systems.three_brokers(system, workdir) as cluster:
            create_topic(cluster, TOPIC, partitions=PARTITIONS, replication=3, config={"min.insync.replicas": "2"})
            with _meter(*cluster.nodes) as meter:
                seconds = clients.produce(cluster.bootstrap, TOPIC, n, size, linger_ms=5, acks="all")
        return {"records_s": n / seconds, "mb_s": _mb(n, size, seconds), **meter.values(n * size)}


class CatchUp(Workload):
    """Consumer catch-up (W3, W9, W10): records written first with W1's producer, then read from
    offset 0 by one librdkafka consumer assigned every partition, then by Kafka's Java
    ConsumerPerformance (a consumer group). Broker CPU per GB for each reader's phase."""

    def __init__(self, key: str, title: str, sizes: Callable[[Scale], tuple[int, int]],
                 cpu_goal: Goal | None = None, secure: bool = False) -> None:
        super().__init__(key, title, [
            Metric("records_s", "records/s (librdkafka)", "records/s", True, AT_LEAST_KAFKA),
            Metric("mb_s", "MB/s (librdkafka)", "MB/s", True),
            Metric("perf_records_s", "records/s (ConsumerPerformance)", "records/s", True, AT_LEAST_KAFKA),
            *resource_metrics(cpu_goal=cpu_goal), perf_cpu_metric("ConsumerPerformance", cpu_goal),
        ])
        self.sizes = sizes  # (partitions, bytes) at a scale
        self.secure = secure  # readers on a SASL_SSL listener (W3S); the writes stay plaintext

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        partitions, total = self.sizes(scale)
        size = scale.record_bytes
        n = max(1, total // size)
        with _broker(system, workdir, self.secure) as (broker, bootstrap, conf, java_config):
            clients.create_topics(broker.bootstrap, {TOPIC: partitions}, timeout=900)
            clients.produce(broker.bootstrap, TOPIC, n, size, linger_ms=5, acks="1")
            with _meter(broker) as meter:
                seconds = clients.consume_all(bootstrap, TOPIC, partitions, n, conf=conf)
                cpu = meter.lap()
                perf = perftools.consumer_perf(bootstrap, TOPIC, n, command_config=java_config)
                perf_cpu = meter.lap()
        return {"records_s": n / seconds, "mb_s": _mb(n, size, seconds), "perf_records_s": perf,
                **meter.values(n * size, cpu), "perf_cpu_s_per_gb": resources.per_gb(perf_cpu, n * size)}


class W4(Workload):
    def __init__(self) -> None:
        super().__init__("W4", "end-to-end latency at a fixed rate, 1 KiB, 1 broker, 8 partitions", [
            Metric("p50_ms", "p50 latency", "ms", False, panel="latency"),
            Metric("p99_ms", "p99 latency", "ms", False, Goal("ratio_max", 1.0), panel="latency"),
            Metric("p999_ms", "p99.9 latency", "ms", False, panel="latency"),
            Metric("offered_mb_s", "offered MB/s", "MB/s", True),
            *resource_metrics(),
        ])

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        with systems.single_broker(system, workdir) as broker:
            clients.create_topics(broker.bootstrap, {TOPIC: PARTITIONS})
            with _meter(broker) as meter:
                values = latency.measure(broker.bootstrap, TOPIC, PARTITIONS, rate_mb=scale.w4_rate_mb,
                                         seconds=scale.w4_seconds, size=scale.record_bytes)
        # The bytes the paced producer offered (latency.measure sends exactly these).
        moved = int(scale.w4_rate_mb * 1e6 / scale.record_bytes * scale.w4_seconds) * scale.record_bytes
        return {**values, **meter.values(moved)}


class W5(Workload):
    def __init__(self) -> None:
        super().__init__("W5", "produce 100 B records, linger 0, acks=1, 1 broker, 8 partitions", [
            Metric("records_s", "records/s (librdkafka)", "records/s", True, Goal("ratio_min", 0.5)),
            Metric("mb_s", "MB/s (librdkafka)", "MB/s", True),
            *resource_metrics(),
        ])

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        n, size = scale.w5_records, scale.w5_record_bytes
        with systems.single_broker(system, workdir) as broker:
            clients.create_topics(broker.bootstrap, {TOPIC: PARTITIONS})
            with _meter(broker) as meter:
                seconds = clients.produce(broker.bootstrap, TOPIC, n, size, linger_ms=0, acks="1")
        return {"records_s": n / seconds, "mb_s": _mb(n, size, seconds), **meter.values(n * size)}


class W6(Workload):
    def __init__(self) -> None:
        super().__init__("W6", "failover: kill -9 a partition leader -> first acknowledged produce", [
            Metric("failover_s", "unavailability", "s", False, Goal("riverlog_max", 2.0)),
            *resource_metrics(per_gb=False),
        ])

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        # bench/failover.py's own round (3-process KRaft cluster, RF=3, min ISR 2, idempotent acks=all
        # producer; both systems with Riverlog's failure-detection timings), so the two agree.
        # Resources from the producer's start through the kill to the first ack after it.
        import failover

        meters: list[resources.Meter] = []

        def watch(cluster: Any) -> resources.Meter:
            meters.append(_meter(*cluster.nodes))
            return meters[-1]

        window = failover.one_round(system, scale.w6_case, workdir, dict(failover.RIVERLOG_TIMINGS), watch)
        return {"failover_s": window, **meters[0].values(None)}


@dataclass
class _Filled:
    broker: Any
    workdir: Path


class W7(Workload):
    def __init__(self) -> None:
        super().__init__("W7", "restart after kill -9 with a large log: start -> first produce+fetch", [
            Metric("restart_s", "restart to first produce+fetch", "s", False),
            *resource_metrics(per_gb=False),
        ])

    def prepare(self, system: str, workdir: Path, scale: Scale) -> _Filled:
        # Filling the log is the expensive part; it happens once per system and every round
        # kill -9s and restarts the same broker on the same data.
        size = scale.record_bytes
        broker = systems.new_broker(system, workdir)
        broker.start(timeout=systems.START_TIMEOUT)
        try:
            clients.create_topics(broker.bootstrap, {TOPIC: PARTITIONS})
            clients.produce(broker.bootstrap, TOPIC, max(1, scale.w7_bytes // size), size, linger_ms=5, acks="1")
        finally:
            broker.kill()
        return _Filled(broker, workdir)

    def run(self, system: str, workdir: Path, scale: Scale, state: _Filled) -> Values:
        broker = state.broker
        try:
            # The meter finds the broker's process once it is spawned: its recovery's CPU counts.
            with _meter(broker) as meter:
                start = time.monotonic()
                broker.start(timeout=1800)
                clients.produce_and_fetch_one(broker.bootstrap, TOPIC, timeout=600)
                restart = time.monotonic() - start
            return {"restart_s": restart, **meter.values(None)}
        finally:
            broker.kill()

    def cleanup(self, state: _Filled) -> None:
        state.broker.close()
        shutil.rmtree(state.workdir, ignore_errors=True)


class W8(Workload):
    def __init__(self) -> None:
        super().__init__("W8", "many partitions on one broker: idle CPU and memory", [
            Metric("idle_cpu_pct", "idle CPU (% of a core)", "%", False),
            Metric("rss_mb", "resident memory", "MB", False),
            Metric("create_s", "time to create and lead all partitions", "s", False),
            *resource_metrics(per_gb=False),
        ])

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        total = scale.w8_partitions
        # Topics of at most 1,000 partitions each: one CreateTopics of 10,000 would hit request
        # size and timeout limits that are not what W8 is about.
        topics = {f"many-{i}": min(1000, total - i * 1000) for i in range((total + 999) // 1000)}
        # The meter spans creation, settling and the idle window: its CPU-seconds are mostly
        # the creation's, its RSS the memory the partitions hold.
        with systems.single_broker(system, workdir) as broker:
            with _meter(broker) as meter:
                start = time.monotonic()
                clients.create_topics(broker.bootstrap, topics, timeout=1800)
                created = time.monotonic() - start
                time.sleep(scale.w8_settle_s)
                assert broker.pid is not None
                cpu = resources.idle_cpu_percent(broker.pid, scale.w8_window_s)
                rss = resources.rss_bytes(broker.pid)
            values = meter.values(None)
            # After the window: every partition takes a write, so the numbers are of a broker
            # serving all of them (2026-11-22's Riverlog had run out of file descriptors at
            # partition 6,660 and idled with the rest unopened).
            for topic, partitions in topics.items():
                clients.produce_to_each(broker.bootstrap, topic, partitions, acks="1")
        return {"idle_cpu_pct": cpu, "rss_mb": rss / 1e6, "create_s": created, **values}


class W11(Workload):
    """Many partitions replicated: every follower fetches 1,000 partitions from two leaders."""

    def __init__(self) -> None:
        super().__init__("W11", "produce acks=all to many partitions (1,000 at full scale), RF=3, 3 brokers", [
            Metric("records_s", "records/s (librdkafka)", "records/s", True),
            Metric("mb_s", "MB/s (librdkafka)", "MB/s", True),
            Metric("p99_ms", "send->ack p99 (unthrottled producer)", "ms", False),
            Metric("create_s", "time to create all partitions, each acknowledging an acks=all write", "s", False),
            *resource_metrics(),
        ])

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        n, size, partitions = scale.w11_records, scale.record_bytes, scale.w11_partitions
        with systems.three_brokers(system, workdir) as cluster:
            # Creation ends when every partition has taken an acks=all write, not when the
            # metadata names leaders: Kafka's brokers create the replicas after that, and the
            # timed produce would otherwise pay for it.
            start = time.monotonic()
            clients.create_topics(cluster.bootstrap, {TOPIC: partitions}, replication=3, timeout=900,
                                  config={"min.insync.replicas": "2"})
            clients.produce_to_each(cluster.bootstrap, TOPIC, partitions, acks="all")
            created = time.monotonic() - start
            latencies: list[float] = []
            with _meter(*cluster.nodes) as meter:
                seconds = clients.produce(cluster.bootstrap, TOPIC, n, size, linger_ms=5, acks="all",
                                          latencies=latencies)
        latencies.sort()
        p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1e3
        return {"records_s": n / seconds, "mb_s": _mb(n, size, seconds), "p99_ms": p99, "create_s": created,
                **meter.values(n * size)}


class W12(Workload):
    """Transactional producer (issue #16): one confluent-kafka producer with a transactional.id, in
    a process of its own, commits transactions of 100 records of 1 KiB, each spanning all 8
    partitions, one after another (begin -> 100 sends -> commit, waiting for the commit). The
    transaction path - AddPartitionsToTxn, EndTxn, the coordinator's log writes and the markers
    to 8 partitions - is paid once per 100 records, so it weighs on records/s as much as the
    produce path does. Not Kafka's ProducerPerformance: its transactions end after a duration
    (--transaction-duration-ms), not a number of records. Both systems get the same
    ``__transaction_state`` settings (replication 1, 3 partitions: one broker)."""

    TXN_STATE = {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
                 "transaction.state.log.num.partitions": "3"}

    def __init__(self) -> None:
        super().__init__("W12", "transactional producer, 100 x 1 KiB per transaction over 8 partitions, 1 broker", [
            Metric("records_s", "records/s (librdkafka, transactional)", "records/s", True, AT_LEAST_KAFKA),
            Metric("commits_s", "committed transactions/s", "txn/s", True, AT_LEAST_KAFKA),
            Metric("mb_s", "MB/s (librdkafka, transactional)", "MB/s", True),
            Metric("commit_p50_ms", "commit_transaction p50", "ms", False, panel="commit latency"),
            Metric("commit_p99_ms", "commit_transaction p99", "ms", False, panel="commit latency"),
            *resource_metrics(),
        ])

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        size = scale.record_bytes
        with systems.single_broker(system, workdir, self.TXN_STATE) as broker:
            clients.create_topics(broker.bootstrap, {TOPIC: PARTITIONS})
            load = txn.Load(broker.bootstrap, TOPIC, PARTITIONS, scale.w12_transactions, scale.w12_records_per_txn,
                            size, f"bench-{system}")
            # The producer's start (InitProducerId, which creates __transaction_state) and its
            # warm-up transactions are outside the measured phase.
            with txn.TransactionalProducer(load) as producer, _meter(broker) as meter:
                result = producer.run()
        commit_ms = sorted(result.commit_ms)

        def pct(q: float) -> float:
            return commit_ms[min(len(commit_ms) - 1, int(q * len(commit_ms)))]

        return {"records_s": result.records / result.seconds, "commits_s": result.commits / result.seconds,
                "mb_s": _mb(result.records, size, result.seconds), "commit_p50_ms": pct(0.5),
                "commit_p99_ms": pct(0.99), **meter.values(result.records * size)}


class Omb(Workload):
    """OpenMessaging-Benchmark style (issue #15): one topic of ``partitions`` on one broker, 1 KiB
    records, ``count`` producer and ``count`` consumer processes (acks=all, linger 1 ms). A
    fixed-rate phase (publish and end-to-end latency), then a search for the maximum rate."""

    def __init__(self, partitions: int, count: int) -> None:
        latency_metrics = [
            Metric(f"{kind}_{name}_ms", f"{what} {label}", "ms", False, panel=what)
            for kind, what in (("pub", "publish latency"), ("e2e", "end-to-end latency"))
            for name, label in (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"), ("p9999", "p99.99"))
        ]
        super().__init__(
            f"O{partitions}x{count}",
            f"OMB-style: {partitions} partitions, {count} producer(s) + {count} consumer(s), fixed rate and max rate",
            [
                *latency_metrics,
                Metric("fixed_mb_s", "achieved MB/s at the fixed rate", "MB/s", True),
                Metric("max_mb_s", "maximum sustained MB/s", "MB/s", True),
                *resource_metrics(),
            ],
        )
        self.partitions = partitions
        self.count = count

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        search = omb.Search(scale.omb_search_start_mb, scale.omb_search_factor, scale.omb_search_steps,
                            scale.omb_step_s, scale.omb_latency_limit_ms)
        with systems.single_broker(system, workdir) as broker:
            clients.create_topics(broker.bootstrap, {TOPIC: self.partitions})
            with omb.Clients(broker.bootstrap, TOPIC, self.partitions, self.count, scale.record_bytes) as load, \
                    _meter(broker) as meter:
                fixed = omb.fixed_rate(load, scale.omb_rate_mb, scale.omb_seconds)
                # CPU per GB of the fixed-rate phase: the same load offered to both systems.
                fixed_cpu = meter.lap()
                searched = omb.max_rate(load, search, f"{self.key} {system}")
        moved = int(fixed["fixed_records"]) * scale.record_bytes
        return {**fixed, **searched, **meter.values(moved, fixed_cpu)}


class M1(Workload):
    """MirrorMaker 2 throughput (issue #19, acceptance 5): two clusters of the same system, one
    broker each; the source's topic filled first, then MirrorMaker 2's connectors on a Connect
    worker of the target (``harness/mirror.py``). Measured from the source connector's start
    until the target holds every record; the worker's start-up is before that and reported on
    its own. M1E: the same with exactly-once (the worker's ``exactly.once.source.support`` and
    the connector's ``exactly.once.support=required``)."""

    WAIT_S = 900.0  # a stalled copy fails the run instead of holding the rest of the benchmark

    def __init__(self, exactly_once: bool = False) -> None:
        title = "MirrorMaker 2: copy a filled topic (8 partitions), 1 KiB records, 1 broker -> 1 broker, same system"
        super().__init__("M1E" if exactly_once else "M1", f"{title}, exactly-once" if exactly_once else title, [
            Metric("records_s", "records/s mirrored", "records/s", True),
            Metric("mb_s", "MB/s mirrored", "MB/s", True),
            Metric("copy_records_s", "records/s, the copy alone", "records/s", True),
            Metric("first_record_s", "connector start -> first record", "s", False),
            Metric("worker_start_s", "Connect worker start-up", "s", False),
            Metric("worker_cpu_s_per_gb", "Connect worker CPU per GB", "s/GB", False),
            Metric("worker_rss_peak_mib", "Connect worker RSS, peak", "MiB", False),
            *resource_metrics(),
        ])
        self.exactly_once = exactly_once

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        from support.brokers import free_ports
        from support.clients import wait_until
        from support.connect import ConnectWorker

        n, size, partitions = scale.m1_records, scale.record_bytes, scale.m1_partitions
        txn_state = mirror.SINGLE_BROKER_TXN
        with systems.single_broker(system, workdir / "source", txn_state) as source, \
                systems.single_broker(system, workdir / "target", txn_state) as target:
            clients.create_topics(source.bootstrap, {TOPIC: partitions})
            clients.produce(source.bootstrap, TOPIC, n, size, linger_ms=5, acks="1")
            (port,) = free_ports(1)
            worker = ConnectWorker(systems.kafka_libs(), workdir, "mirror-worker", target.bootstrap, port,
                                   group_id=mirror.WORKER_GROUP, replication_factor=1,
                                   overrides=mirror.worker_overrides(self.exactly_once), heap=mirror.WORKER_HEAP)
            try:
                started = time.monotonic()
                worker.start(timeout=300)
                worker_start = time.monotonic() - started
                configs = mirror.connector_configs(source.bootstrap, target.bootstrap, TOPIC, scale.m1_tasks,
                                                   self.exactly_once)
                source_config = configs.pop(mirror.SOURCE_CONNECTOR)
                # Checkpoint and heartbeat first, running before the phase: they copy no
                # records, and their start (topics, tasks) is not the source's.
                for name, config in configs.items():
                    worker.rest.put_connector(name, config)
                wait_until(lambda: all(worker.rest.running(name, None) for name in configs), timeout=300,
                           interval=0.5, message="checkpoint and heartbeat connectors running")

                def worker_pid() -> list[int | None]:
                    return [worker.proc.pid if worker.proc is not None else None]

                with mirror.progress_probe(target.bootstrap, TOPIC, partitions, self.exactly_once) as copied, \
                        _meter(source, target) as meter, resources.Meter(worker_pid) as worker_meter:
                    start = time.monotonic()
                    worker.rest.put_connector(mirror.SOURCE_CONNECTOR, source_config)
                    progress = mirror.wait_for_copy(copied, n, start, self.WAIT_S,
                                                    describe=lambda: worker.log_tail(40))
            finally:
                worker.kill()
        worker_rss = worker_meter.rss_values()["rss_peak_mib"]
        return {**mirror.rates(n, size, progress), "worker_start_s": worker_start,
                "worker_cpu_s_per_gb": resources.per_gb(worker_meter.cpu_seconds(), n * size),
                "worker_rss_peak_mib": worker_rss, **meter.values(n * size)}


class SR1(Workload):
    """The schema registry's REST API (issue #20, acceptance 7; ``harness/registry.py``): requests/s,
    p50 and p99 of registering new schemas, registering them again, and three lookups and a
    compatibility check, from ``sr_clients`` concurrent clients. Standalone (SR1: ``riverlog
    schema-registry`` on a broker of either system, the Kafka column the same registry on Apache
    Kafka) or inside the broker (SR1I, Riverlog only). Measured phase: the six request phases;
    the broker's and the registry's start and the writer's election come before."""

    def __init__(self, in_broker: bool = False) -> None:
        where = "inside the Riverlog broker" if in_broker else "standalone (riverlog schema-registry) on a broker"
        # Short names: a plot panel puts six of them side by side (the panel's name is stripped).
        names = {"register_new": "register new", "register_existing": "register again", "get_by_id": "GET id",
                 "get_latest": "GET latest", "lookup": "lookup", "compatibility": "compat check"}
        rates = [Metric(f"{phase}_s", f"requests/s {name}", "requests/s", True,
                        Goal("riverlog_min", SR_HEALTHY[phase]), panel="requests/s") for phase, name in names.items()]
        latencies = [Metric(f"{phase}_{q}_ms", f"{q} latency {name}", "ms", False, panel=f"{q} latency")
                     for q in ("p50", "p99") for phase, name in names.items()]
        super().__init__("SR1I" if in_broker else "SR1", f"schema registry REST API, Avro, {where}", [
            *rates, *latencies, *_registry_metrics(in_broker), *resource_metrics(per_gb=False),
        ], only_systems=("riverlog",) if in_broker else ())
        self.in_broker = in_broker

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        started = registry.in_broker(workdir) if self.in_broker else registry.standalone(system, workdir)
        with started as reg, _meter(reg.broker) as meter, resources.Meter(lambda: [reg.pid()]) as own:
            values = registry.run_phases(reg.url, scale.sr_subjects, scale.sr_lookups, scale.sr_clients,
                                         scale.sr_seed)
        return {**values, **_registry_values(own, self.in_broker), **meter.values(None)}


# What a healthy registry answers at least on the 2-core machines these runs use: about a quarter
# of the slowest round of 2026-11-28's run on a loaded machine (load average 6-16; see
# docs/benchmarks.md), so the noise of a shared machine stays above it and a regression (reads
# that go to the log, a write path twice as long, a serializer that re-registers) does not.
# Writes are one at a time (the registry's write lock, acks=all, read back); reads are lookups in
# memory.
SR_HEALTHY = {"register_new": 100.0, "register_existing": 500.0, "get_by_id": 1000.0, "get_latest": 1000.0,
              "lookup": 400.0, "compatibility": 400.0}
SERDE_HEALTHY = {"avro": 5_000.0, "protobuf": 5_000.0, "json": 1_000.0}


def _registry_metrics(in_broker: bool) -> list[Metric]:
    if in_broker:  # the registry is the broker's process: its CPU and memory are the broker's rows
        return []
    return [Metric("registry_cpu_s", "registry CPU over the phase", "s", False, resource=True),
            Metric("registry_rss_peak_mib", "registry RSS, peak", "MiB", False, resource=True)]


def _registry_values(meter: resources.Meter, in_broker: bool) -> Values:
    if in_broker:
        return {}
    return {"registry_cpu_s": meter.cpu_seconds(), "registry_rss_peak_mib": meter.rss_values()["rss_peak_mib"]}


class SR2(Workload):
    """The serializer round trip (issue #20, acceptance 7; ``harness/serde.py``): confluent-kafka's
    Avro, Protobuf and JSON Schema serializers produce ``sr_serde_records`` records each through
    a topic of 8 partitions and their deserializers read them back, with the standalone registry
    (the Kafka column: the same registry and clients on Apache Kafka)."""

    def __init__(self) -> None:
        metrics: list[Metric] = []
        for fmt in serde.FORMATS:
            metrics += [
                Metric(f"{fmt}_records_s", f"round trip records/s {fmt}", "records/s", True,
                       Goal("riverlog_min", SERDE_HEALTHY[fmt]), panel="round trip records/s"),
                Metric(f"{fmt}_produce_records_s", f"serialize+produce records/s {fmt}", "records/s", True,
                       panel="serialize+produce records/s"),
                Metric(f"{fmt}_consume_records_s", f"consume+deserialize records/s {fmt}", "records/s", True,
                       panel="consume+deserialize records/s"),
            ]
        # The first calls talk to the registry (serialize registers, deserialize fetches by id);
        # the cached ones do not.
        for kind in ("first", "cached"):
            unit = "ms" if kind == "first" else "us"
            metrics += [Metric(f"{fmt}_{kind}_{op}_{unit}", f"{kind} call {fmt} {op}", unit, False,
                               panel=f"{kind} call")
                        for fmt in serde.FORMATS for op in ("serialize", "deserialize")]
        super().__init__("SR2", "serializer round trip: Avro, Protobuf, JSON Schema through a topic, standalone "
                         "registry, 1 broker", [*metrics, *_registry_metrics(False), *resource_metrics(per_gb=False)])

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        n = scale.sr_serde_records
        values: Values = {}
        with registry.standalone(system, workdir) as reg:
            bootstrap = reg.broker.bootstrap
            clients.create_topics(bootstrap, {f"orders-{fmt}": PARTITIONS for fmt in serde.FORMATS})
            with _meter(reg.broker) as meter, resources.Meter(lambda: [reg.pid()]) as own:
                for fmt in serde.FORMATS:
                    values.update(serde.round_trip(bootstrap, reg.url, fmt, f"orders-{fmt}", PARTITIONS, n,
                                                   scale.sr_seed))
        return {**values, **_registry_values(own, False), **meter.values(None)}


class G1(Workload):
    """Consumer group rebalance time (issue #21, acceptance 5; ``harness/rebalance.py``):
    ``g1_members`` consumers join one group one by one, with the classic protocol and with
    KIP-848's consumer protocol; the time from each member's subscribe until the group has
    settled again (every member owning partitions, none owned twice, all owned), and how many
    partition-seconds nobody owned meanwhile (nobody consumed them)."""

    def __init__(self) -> None:
        metrics: list[Metric] = []
        for protocol in rebalance.PROTOCOLS:
            metrics += [
                Metric(f"{protocol}_total_s", f"{protocol} protocol: all members joined", "s", False,
                       panel="seconds until settled"),
                Metric(f"{protocol}_mean_s", f"{protocol} protocol: one join, mean", "s", False,
                       panel="seconds until settled"),
                Metric(f"{protocol}_worst_s", f"{protocol} protocol: one join, worst", "s", False,
                       panel="seconds until settled"),
                Metric(f"{protocol}_unowned_partition_s", f"{protocol} protocol: partition-seconds unowned per join",
                       "partition-s", False, panel="partition-seconds unowned per join"),
            ]
        super().__init__("G1", "consumer group rebalance: members join one by one, classic vs consumer "
                         "protocol (KIP-848), 1 broker", [*metrics, *resource_metrics(per_gb=False)])

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        values: Values = {}
        with systems.single_broker(system, workdir) as broker:
            clients.create_topics(broker.bootstrap, {TOPIC: scale.g1_partitions})
            with _meter(broker) as meter:
                for protocol in rebalance.PROTOCOLS:
                    times = rebalance.join_one_by_one(broker.bootstrap, TOPIC, scale.g1_partitions,
                                                      scale.g1_members, protocol)
                    values.update({f"{protocol}_total_s": times.total, f"{protocol}_mean_s": times.mean,
                                   f"{protocol}_worst_s": times.worst,
                                   f"{protocol}_unowned_partition_s": times.unowned_mean})
        return {**values, **meter.values(None)}


class S1(Workload):
    """Share-group throughput (issue #21, acceptance 5; ``harness/share.py``): ``s1_consumers``
    Java KafkaShareConsumers of one share group read ``s1_records`` records of 1 KiB from a topic
    of ``s1_partitions`` partitions, acknowledging implicitly; records acknowledged per second."""

    def __init__(self) -> None:
        super().__init__("S1", "share group: Java KafkaShareConsumers, implicit acknowledgement, 1 KiB records, "
                         "1 broker", [
                             Metric("records_s", "records acknowledged/s", "records/s", True),
                             Metric("mb_s", "MB/s acknowledged", "MB/s", True),
                             *resource_metrics(),
                         ])

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        n, size = scale.s1_records, scale.record_bytes
        with systems.single_broker(system, workdir) as broker:
            clients.create_topics(broker.bootstrap, {TOPIC: scale.s1_partitions})
            with _meter(broker) as meter:
                rate, seconds = share.share_throughput(broker.bootstrap, TOPIC, scale.s1_partitions, n, size,
                                                       scale.s1_consumers)
        return {"records_s": rate, "mb_s": _mb(n, size, seconds), **meter.values(n * size)}


CATCH_UP = "consume catch-up, 1 KiB records, 1 broker"
W3 = CatchUp("W3", f"{CATCH_UP}, 8 partitions", lambda s: (PARTITIONS, s.w3_bytes))
W3S = CatchUp("W3S", f"{CATCH_UP}, 8 partitions, over SASL_SSL", lambda s: (PARTITIONS, s.w3_bytes), secure=True)
W9 = CatchUp("W9", f"{CATCH_UP}, 100 partitions", lambda s: (s.w9_partitions, s.w9_bytes), HALF_KAFKA_CPU)
W10 = CatchUp("W10", f"{CATCH_UP}, many partitions (1,000 at full scale)", lambda s: (s.w10_partitions, s.w10_bytes),
              HALF_KAFKA_CPU)
OMB = [Omb(16, 1), Omb(16, 4), Omb(100, 1), Omb(100, 4)]

WORKLOADS: dict[str, Workload] = {
    w.key: w for w in (W1(), W1(secure=True), W2(), W3, W3S, W4(), W5(), W6(), W7(), W8(), W9, W10, W11(), W12(), *OMB,
                       M1(), M1(exactly_once=True), SR1(), SR1(in_broker=True), SR2(), G1(), S1())
}
