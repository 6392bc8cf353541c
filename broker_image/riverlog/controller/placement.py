"""Replica placement: which brokers host each partition's replicas.

Kafka's scheme: start at a (rotating) broker and spread partitions round-robin, shifting the
followers so replicas of consecutive partitions do not pile onto the same pair. With racks, the
broker list is interleaved by rack first so each partition's replicas span racks. The first
replica is the preferred leader.
"""

from __future__ import annotations

from collections.abc import Sequence


def rack_alternating(brokers: Sequence[tuple[int, str | None]]) -> list[int]:
    """Broker ids ordered so consecutive entries come from different racks where possible."""
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in sorted(brokers):
        by_rack.setdefault(rack or "", []).append(broker_id)
    racks = sorted(by_rack)
    out: list[int] = []
    i = 0
    while len(out) < len(brokers):
        rack = racks[i % len(racks)]
        if by_rack[rack]:
            out.append(by_rack[rack].pop(0))
        i += 1
    return out


def assign_replicas(
    brokers: Sequence[tuple[int, str | None]],
    num_partitions: int,
    replication_factor: int,
    *,
    start_index: int = 0,
    first_partition: int = 0,
) -> list[list[int]]:
    """Replica lists for partitions ``first_partition .. first_partition + num_partitions - 1``."""
    if replication_factor < 1 or replication_factor > len(brokers):
        raise ValueError(
            f"replication factor {replication_factor} must be between 1 and the "
            f"{len(brokers)} available brokers"
        )
    order = rack_alternating(brokers)
    n = len(order)
    result: list[list[int]] = []
    shift_base = start_index
    for p in range(first_partition, first_partition + num_partitions):
        first = (start_index + p) % n
        if p > 0 and p % n == 0:
            shift_base += 1
        shift = 1 + shift_base % max(1, n - 1) if n > 1 else 0
        replicas = [order[first]]
        for j in range(replication_factor - 1):
            replicas.append(order[(first + 1 + ((shift - 1 + j) % (n - 1))) % n])
        result.append(replicas)
    return result
