"""Failover time of a three-process cluster, Riverlog and Apache Kafka side by side.

Each round starts three broker processes in KRaft combined mode (every node a voter; the
``cluster`` tier's harness, ``tests/support/process_cluster.py``, on loopback), creates a RF=3,
min.insync.replicas=2 topic and runs a confluent-kafka idempotent acks=all producer; then it kill
-9s a partition leader and measures the *unavailability window*: from the kill to the
acknowledgement of the first record sent after it. Two cases:

- ``leader``: the leader is not the active controller (the controller fences it when its broker
  session expires, and elects a new leader from the ISR);
- ``controller``: the leader is also the active controller (a new controller must be elected
  first, then the broker's session expires).

Both systems get the same settings: each one's own defaults, except the failure-detection
timings, which are set to Riverlog's defaults for both (``--kafka-timings`` keeps Kafka's own).

    .venv/bin/python bench/failover.py --rounds 3
    .venv/bin/python bench/failover.py --rounds 3 --target riverlog
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for extra in ("broker_image", "tests"):
    sys.path.insert(0, str(REPO / extra))

from support.brokers import kafka_dist  # noqa: E402
from support.cluster_workload import SequencedProducer, create_topic  # noqa: E402
from support.process_cluster import ProcessCluster  # noqa: E402

# Riverlog's defaults for failure detection (config.py and RaftConfig).
RIVERLOG_TIMINGS = {
    "broker.session.timeout.ms": 1500,
    "broker.heartbeat.interval.ms": 500,
    "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.fetch.timeout.ms": 2000,
    "controller.quorum.request.timeout.ms": 1000,
    "controller.quorum.election.backoff.max.ms": 100,
}
TOPIC = "failover"


# Called with the running cluster; the context it returns spans the measured part of a round
# (bench/harness's W6 samples the brokers' CPU and memory over it).
Watch = Callable[[ProcessCluster], contextlib.AbstractContextManager[Any]]


def one_round(target: str, case: str, base: Path, overrides: dict[str, object], watch: Watch | None = None) -> float:
    libs = Path(kafka_dist.install()) if target == "kafka" else None
    with ProcessCluster(base, 3, target=target, overrides=overrides, netns=False, kafka_libs=libs) as cluster:
        create_topic(cluster, TOPIC, partitions=3, replication=3, config={"min.insync.replicas": "2"})
        controller = cluster.active_controller()
        states = {p: cluster.partition_state(TOPIC, p) for p in range(3)}
        if case == "controller":
            chosen = [p for p, s in states.items() if s.leader == controller]
        else:
            chosen = [p for p, s in states.items() if s.leader != controller]
        if not chosen:
            raise RuntimeError(f"no partition led by {'the' if case == 'controller' else 'a non-'}controller: {states}")
        partition = chosen[0]
        victim = states[partition].leader
        watching = watch(cluster) if watch is not None else contextlib.nullcontext()
        with watching:
            return _kill_and_wait(cluster, partition, victim)


def _kill_and_wait(cluster: ProcessCluster, partition: int, victim: int) -> float:
    """Produce, kill -9 the leader ``victim`` of ``partition``: seconds until the first
    acknowledgement of a record sent after the kill."""
    producer = SequencedProducer(cluster.bootstrap, TOPIC, [partition], name="b", rate=500).start()
    try:
        deadline = time.monotonic() + 60
        while producer.acked_count() < 1000:
            if time.monotonic() > deadline or producer.errors:
                raise RuntimeError(f"producer not running: {producer.errors[:3]}")
            time.sleep(0.05)
        killed_at = time.monotonic()
        cluster.node(victim).kill()
        deadline = time.monotonic() + 90
        while (first := producer.first_ack_enqueued_after(killed_at)) is None:
            if time.monotonic() > deadline:
                raise RuntimeError("production did not resume within 90 s")
            time.sleep(0.05)
        return first.acked - killed_at
    finally:
        producer.stop(flush_timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--target", choices=("riverlog", "kafka", "both"), default="both")
    parser.add_argument("--kafka-timings", action="store_true",
                        help="give Kafka its own default failure-detection timings instead of Riverlog's")
    args = parser.parse_args()
    targets = ("riverlog", "kafka") if args.target == "both" else (args.target,)
    print("| system | case | rounds | median | min | max |")
    print("|---|---|---:|---:|---:|---:|")
    for target in targets:
        overrides: dict[str, object] = {} if (target == "kafka" and args.kafka_timings) else dict(RIVERLOG_TIMINGS)
        for case in ("leader", "controller"):
            windows = []
            for i in range(args.rounds):
                with tempfile.TemporaryDirectory(prefix="failover-") as tmp:
                    window = one_round(target, case, Path(tmp), overrides)
                windows.append(window)
                print(f"{target} {case} round {i + 1}: {window:.2f}s", file=sys.stderr)
            print(f"| {target} | {case} | {len(windows)} | {statistics.median(windows):.2f}s | "
                  f"{min(windows):.2f}s | {max(windows):.2f}s |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
