"""W1–W8 of issue #8. Each workload runs one measurement against one system and returns its
values; the runner alternates systems and repeats rounds. A workload may prepare state once per
system (W7's 10 GB log) that its rounds then reuse."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import clients, latency, perftools, resources, systems
from harness.metrics import AT_LEAST_KAFKA, Goal, Metric
from harness.scale import Scale

TOPIC = "bench"
PARTITIONS = 8
Values = dict[str, float]


@dataclass
class Workload:
    key: str
    title: str
    metrics: list[Metric] = field(default_factory=list)

    def prepare(self, system: str, workdir: Path, scale: Scale) -> Any:
        """State shared by all rounds of one system (default: none)."""
        return None

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        raise NotImplementedError

    def cleanup(self, state: Any) -> None:
        """Undo :meth:`prepare`."""


def _mb(records: int, size: int, seconds: float) -> float:
    return records * size / 1e6 / seconds


class W1(Workload):
    def __init__(self) -> None:
        super().__init__("W1", "produce 1 KiB, 1 broker, 8 partitions, linger 5 ms, acks=1", [
            Metric("records_s", "records/s (librdkafka)", "records/s", True, AT_LEAST_KAFKA),
            Metric("mb_s", "MB/s (librdkafka)", "MB/s", True),
            Metric("perf_records_s", "records/s (ProducerPerformance)", "records/s", True, AT_LEAST_KAFKA),
        ])

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        n, size = scale.w1_records, scale.record_bytes
        with systems.single_broker(system, workdir) as broker:
            clients.create_topics(broker.bootstrap, {TOPIC: PARTITIONS, "perf": PARTITIONS})
            seconds = clients.produce(broker.bootstrap, TOPIC, n, size, linger_ms=5, acks="1")
            perf = perftools.producer_perf(broker.bootstrap, "perf", n, size, linger_ms=5, acks="1")
        return {"records_s": n / seconds, "mb_s": _mb(n, size, seconds), "perf_records_s": perf}


class W2(Workload):
    def __init__(self) -> None:
        super().__init__("W2", "produce 1 KiB, 3 brokers, RF=3, acks=all, min ISR 2", [
            Metric("records_s", "records/s (librdkafka)", "records/s", True, AT_LEAST_KAFKA),
            Metric("mb_s", "MB/s (librdkafka)", "MB/s", True),
        ])

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        from support.cluster_workload import create_topic

        n, size = scale.w2_records, scale.record_bytes
        with systems.three_brokers(system, workdir) as cluster:
            create_topic(cluster, TOPIC, partitions=PARTITIONS, replication=3, config={"min.insync.replicas": "2"})
            seconds = clients.produce(cluster.bootstrap, TOPIC, n, size, linger_ms=5, acks="all")
        return {"records_s": n / seconds, "mb_s": _mb(n, size, seconds)}


class W3(Workload):
    def __init__(self) -> None:
        super().__init__("W3", "consume catch-up, 1 KiB records, 1 broker, 8 partitions", [
            Metric("records_s", "records/s (librdkafka)", "records/s", True, AT_LEAST_KAFKA),
            Metric("mb_s", "MB/s (librdkafka)", "MB/s", True),
            Metric("perf_records_s", "records/s (ConsumerPerformance)", "records/s", True, AT_LEAST_KAFKA),
        ])

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        size = scale.record_bytes
        n = max(1, scale.w3_bytes // size)
        with systems.single_broker(system, workdir) as broker:
            clients.create_topics(broker.bootstrap, {TOPIC: PARTITIONS})
            clients.produce(broker.bootstrap, TOPIC, n, size, linger_ms=5, acks="1")
            seconds = clients.consume_all(broker.bootstrap, TOPIC, PARTITIONS, n)
            perf = perftools.consumer_perf(broker.bootstrap, TOPIC, n)
        return {"records_s": n / seconds, "mb_s": _mb(n, size, seconds), "perf_records_s": perf}


class W4(Workload):
    def __init__(self) -> None:
        super().__init__("W4", "end-to-end latency at a fixed rate, 1 KiB, 1 broker, 8 partitions", [
            Metric("p50_ms", "p50 latency", "ms", False),
            Metric("p99_ms", "p99 latency", "ms", False, Goal("ratio_max", 1.0)),
            Metric("p999_ms", "p99.9 latency", "ms", False),
            Metric("offered_mb_s", "offered MB/s", "MB/s", True),
        ])

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        with systems.single_broker(system, workdir) as broker:
            clients.create_topics(broker.bootstrap, {TOPIC: PARTITIONS})
            return latency.measure(broker.bootstrap, TOPIC, PARTITIONS, rate_mb=scale.w4_rate_mb,
                                   seconds=scale.w4_seconds, size=scale.record_bytes)


class W5(Workload):
    def __init__(self) -> None:
        super().__init__("W5", "produce 100 B records, linger 0, acks=1, 1 broker, 8 partitions", [
            Metric("records_s", "records/s (librdkafka)", "records/s", True, Goal("ratio_min", 0.5)),
            Metric("mb_s", "MB/s (librdkafka)", "MB/s", True),
        ])

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        n, size = scale.w5_records, scale.w5_record_bytes
        with systems.single_broker(system, workdir) as broker:
            clients.create_topics(broker.bootstrap, {TOPIC: PARTITIONS})
            seconds = clients.produce(broker.bootstrap, TOPIC, n, size, linger_ms=0, acks="1")
        return {"records_s": n / seconds, "mb_s": _mb(n, size, seconds)}


class W6(Workload):
    def __init__(self) -> None:
        super().__init__("W6", "failover: kill -9 a partition leader -> first acknowledged produce", [
            Metric("failover_s", "unavailability", "s", False, Goal("riverlog_max", 2.0)),
        ])

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        # bench/failover.py's own round (3-process KRaft cluster, RF=3, min ISR 2, idempotent acks=all
        # producer; both systems with Riverlog's failure-detection timings), so the two agree.
        import failover

        window = failover.one_round(system, scale.w6_case, workdir, dict(failover.RIVERLOG_TIMINGS))
        return {"failover_s": window}


@dataclass
class _Filled:
    broker: Any
    workdir: Path


class W7(Workload):
    def __init__(self) -> None:
        super().__init__("W7", "restart after kill -9 with a large log: start -> first produce+fetch", [
            Metric("restart_s", "restart to first produce+fetch", "s", False),
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
        start = time.monotonic()
        try:
            broker.start(timeout=1800)
            clients.produce_and_fetch_one(broker.bootstrap, TOPIC, timeout=600)
            return {"restart_s": time.monotonic() - start}
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
        ])

    def run(self, system: str, workdir: Path, scale: Scale, state: Any) -> Values:
        total = scale.w8_partitions
        # Topics of at most 1,000 partitions each: one CreateTopics of 10,000 would hit request
        # size and timeout limits that are not what W8 is about.
        topics = {f"many-{i}": min(1000, total - i * 1000) for i in range((total + 999) // 1000)}
        with systems.single_broker(system, workdir) as broker:
            start = time.monotonic()
            clients.create_topics(broker.bootstrap, topics, timeout=1800)
            created = time.monotonic() - start
            time.sleep(scale.w8_settle_s)
            assert broker.pid is not None
            cpu = resources.idle_cpu_percent(broker.pid, scale.w8_window_s)
            rss = resources.rss_bytes(broker.pid)
        return {"idle_cpu_pct": cpu, "rss_mb": rss / 1e6, "create_s": created}


WORKLOADS: dict[str, Workload] = {w.key: w for w in (W1(), W2(), W3(), W4(), W5(), W6(), W7(), W8())}
