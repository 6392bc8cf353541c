"""Seeded fault schedules for a process cluster: kill -9 and restart, SIGSTOP/SIGCONT, or a cut
network link, one node at a time, each undone after a few seconds and followed by a wait until
the cluster is healthy again. Used by the cluster tier's fault-injection tests.

A fault names its node by *role*: a fixed node id, or a role resolved when the fault is injected
(``txn-coordinator``: the leader of a ``__transaction_state`` partition, i.e. a transaction
coordinator; ``group-coordinator``: the leader of a ``__consumer_offsets`` partition), so a seed
can aim at the brokers that matter whichever node leads them at the time.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from support.process_cluster import ProcessCluster

KINDS = ("kill", "pause", "isolate")
SEED_ENV = "RIVERLOG_FAULT_SEED"  # replays one schedule
HEALTHY_TIMEOUT = 120.0


@dataclass(frozen=True)
class Fault:
    kind: str
    node: int  # a node id; 0 when ``role`` names the node
    duration: float  # how long the node stays down, frozen or cut off
    gap: float  # healthy time after recovery, before the next fault
    role: str = ""  # "" (the node id above) or a role resolved at injection time

    def target(self) -> str:
        return self.role or f"node {self.node}"

    def __str__(self) -> str:
        return f"{self.kind} {self.target()} for {self.duration:.1f}s, then {self.gap:.1f}s healthy"


def schedule(seed: int, *, nodes: int = 3) -> Iterator[Fault]:
    """The same seed always gives the same faults (the timing around them varies). Faults come
    in rounds holding each kind once, in random order, so every run has every kind."""
    rng = random.Random(seed)
    while True:
        for kind in rng.sample(KINDS, len(KINDS)):
            yield Fault(kind, rng.randint(1, nodes), round(rng.uniform(2.0, 7.0), 1), round(rng.uniform(1.0, 4.0), 1))


def role_schedule(seed: int, roles: Sequence[str]) -> Iterator[Fault]:
    """Like :func:`schedule`, but each round pairs the kinds with ``roles`` shuffled (cycled if
    fewer), so every round hits every role, each time with another kind."""
    rng = random.Random(seed)
    while True:
        kinds = rng.sample(KINDS, len(KINDS))
        targets = rng.sample(list(roles), len(roles))
        for i, kind in enumerate(kinds):
            yield Fault(kind, 0, round(rng.uniform(2.0, 7.0), 1), round(rng.uniform(1.0, 4.0), 1),
                        role=targets[i % len(targets)])


class Timeline:
    def __init__(self) -> None:
        self.start = time.monotonic()
        self.lines: list[str] = []

    def log(self, text: str) -> None:
        line = f"+{time.monotonic() - self.start:6.1f}s {text}"
        self.lines.append(line)
        print(line, flush=True)

    def __str__(self) -> str:
        return "\n".join(self.lines)


def seeded_timeline(record_property: Callable[[str, object], None]) -> tuple[int, Timeline]:
    """The run's seed (``RIVERLOG_FAULT_SEED`` or a random one), recorded in the test report
    and as the timeline's first line."""
    seed = int(os.environ.get(SEED_ENV) or random.SystemRandom().randrange(1 << 31))
    record_property("fault_seed", seed)
    timeline = Timeline()
    timeline.log(f"seed {seed} ({SEED_ENV}={seed} replays this schedule)")
    return seed, timeline


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (as a signed 32-bit int) of an ASCII/BMP string."""
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def internal_partition(key: str, partitions: int) -> int:
    """Which partition of ``__transaction_state`` / ``__consumer_offsets`` holds ``key`` (Kafka's
    ``Utils.abs(key.hashCode) % partitions``; ``Utils.abs`` maps MIN_VALUE to 0)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def leader_of(cluster: ProcessCluster, topic: str, partition: int) -> int:
    return cluster.wait_until(lambda: cluster.partition_state(topic, partition).leader > 0 and
                              cluster.partition_state(topic, partition).leader,
                              timeout=HEALTHY_TIMEOUT, what=f"a leader of {topic}-{partition}")


def inject(cluster: ProcessCluster, fault: Fault, timeline: Timeline, *,
           resolve: Callable[[str], int] | None = None,
           healthy_topics: Iterable[str] = ("__consumer_offsets",)) -> int:
    """Apply the fault, undo it after its duration, and wait until the cluster is healthy;
    returns the node it hit."""
    node_id = resolve(fault.role) if fault.role and resolve is not None else fault.node
    node = cluster.node(node_id)
    timeline.log(f"fault: {fault}" + (f" (node {node_id})" if fault.role else ""))
    if fault.kind == "kill":
        node.kill()
        time.sleep(fault.duration)
        node.start(wait=False)
    elif fault.kind == "pause":
        node.pause()
        time.sleep(fault.duration)
        node.resume()
    else:
        cluster.isolate(node_id)
        time.sleep(fault.duration)
        cluster.heal(node_id)
    timeline.log(f"undone ({fault.kind} node {node_id}); waiting for the cluster to be healthy")
    recovering = time.monotonic()
    if fault.kind == "kill":
        # Until the controller fences it, metadata still lists the dead node as live and in
        # sync: wait for the new process itself to serve and register first.
        node.wait_ready(HEALTHY_TIMEOUT)
    wait_healthy(cluster, healthy_topics)
    timeline.log(f"healthy again after {time.monotonic() - recovering:.1f}s")
    return node_id


def wait_healthy(cluster: ProcessCluster, topics: Iterable[str]) -> None:
    wanted = list(topics)
    cluster.wait_until(lambda: cluster.healthy(wanted), timeout=HEALTHY_TIMEOUT,
                       what="all brokers live and every ISR complete")


def restore(cluster: ProcessCluster) -> None:
    """Whatever happened, give the checks a whole cluster: every node running, thawed, connected."""
    for node in cluster.nodes:
        if node.paused:
            node.resume()
        if node.node_id in cluster.isolated:
            cluster.heal(node.node_id)
        if not node.running:
            node.start(wait=False)
