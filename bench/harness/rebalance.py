"""G1 (issue #21, acceptance 5): how long a consumer group takes to settle while its members
join one by one, with the classic protocol (JoinGroup/SyncGroup, every member stops while the
group rebalances) and with KIP-848's consumer protocol (``group.protocol=consumer``: the broker
assigns, members only give up the partitions that move).

Members are confluent-kafka consumers in this process, polled round-robin (librdkafka heartbeats
on its own threads; assignments are applied in ``poll``). After each member subscribes the clock
runs until the group has *settled*: every member owns at least one partition, no partition is
owned twice and every partition is owned. Client and broker settings are both systems'
defaults (librdkafka's classic assignors range,roundrobin; the brokers' `uniform` assignor and
5 s consumer heartbeat interval), except the brokers' initial rebalance delay, which the
harness sets to 0 for both (``systems.COMMON_SETTINGS``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer

PROTOCOLS = ("classic", "consumer")
POLL_S = 0.01


class RebalanceTimeout(RuntimeError):
    """The group did not settle in time; the message has every member's assignment."""


@dataclass(frozen=True)
class JoinTimes:
    """Seconds from each member's subscribe until the group settled again, and for each join
    the partition-seconds nobody owned meanwhile (partitions unowned, integrated over the
    join): the classic protocol takes every partition from every member while it rebalances,
    KIP-848's only the partitions that move."""

    per_join: tuple[float, ...]
    unowned_partition_s: tuple[float, ...] = ()

    @property
    def total(self) -> float:
        return sum(self.per_join)

    @property
    def mean(self) -> float:
        return self.total / len(self.per_join)

    @property
    def worst(self) -> float:
        return max(self.per_join)

    @property
    def unowned_mean(self) -> float:
        """Partition-seconds without an owner, per join."""
        return sum(self.unowned_partition_s) / len(self.unowned_partition_s)


def unowned(assignments: Sequence[set[int]], partitions: int) -> int:
    """Partitions of the topic that no member owns."""
    return partitions - len(set().union(*assignments) & set(range(partitions)))


def settled(assignments: Sequence[set[int]], partitions: int) -> bool:
    """Every member owns something, nothing is owned twice, everything is owned."""
    owned = [p for a in assignments for p in a]
    return all(assignments) and len(owned) == len(set(owned)) == partitions and set(owned) == set(range(partitions))


def _member(bootstrap: str, group: str, protocol: str, index: int) -> Consumer:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"{group}-{index}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 3}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    return Consumer(conf)


def join_one_by_one(bootstrap: str, topic: str, partitions: int, members: int, protocol: str,
                    *, group: str | None = None, timeout_s: float = 120.0) -> JoinTimes:
    """Start ``members`` consumers of one new group on ``topic``, one at a time, each once the
    group has settled after the previous one; return how long each join took to settle."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol {protocol!r}: one of {', '.join(PROTOCOLS)}")
    group = group or f"g1-{protocol}-{time.monotonic_ns()}"
    consumers: list[Consumer] = []
    times: list[float] = []
    gaps: list[float] = []
    try:
        for index in range(members):
            consumer = _member(bootstrap, group, protocol, index)
            consumers.append(consumer)
            started = time.monotonic()
            consumer.subscribe([topic])
            deadline = started + timeout_s
            # The first member starts with nothing owned by design; count from the second on.
            owned_before = [{tp.partition for tp in c.assignment()} for c in consumers[:-1]]
            gap, last, missing = 0.0, started, unowned(owned_before, partitions) if index else 0
            while True:
                for c in consumers:
                    c.poll(POLL_S)
                now = time.monotonic()
                gap += missing * (now - last)
                assignments = [{tp.partition for tp in c.assignment()} for c in consumers]
                last, missing = now, (unowned(assignments, partitions) if index else 0)
                if settled(assignments, partitions):
                    times.append(now - started)
                    gaps.append(gap)
                    break
                if time.monotonic() > deadline:
                    raise RebalanceTimeout(f"{protocol} group {group} did not settle within {timeout_s:g} s "
                                           f"after member {index + 1} joined: {assignments}")
    finally:
        for c in consumers:
            c.close()
    return JoinTimes(tuple(times), tuple(gaps))
