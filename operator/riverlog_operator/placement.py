"""Replica moves the operator asks for: draining brokers before a scale-down, spreading
partitions onto new brokers after a scale-up, and replication-factor changes of a topic.

Pure functions over ``{(topic, partition): [replica ids]}``; they return only the partitions
whose replica list changes, and choose deterministically (least-loaded broker, lowest id), so a
retried reconcile asks for the same moves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

TopicPartition = tuple[str, int]
Assignment = Mapping[TopicPartition, Sequence[int]]


class PlacementError(ValueError):
    """The requested layout is impossible (e.g. more replicas than brokers)."""


def _loads(assignments: Assignment, brokers: Iterable[int]) -> Counter[int]:
    load: Counter[int] = Counter({b: 0 for b in brokers})
    for replicas in assignments.values():
        for r in replicas:
            if r in load:
                load[r] += 1
    return load


def _least_loaded(load: Counter[int], replicas: Sequence[int]) -> int | None:
    """The least-loaded broker not among ``replicas``; ties go to the first broker after the
    partition's leader in id order (Kafka's round-robin), so equal loads do not all pick the
    lowest id."""
    skip = set(replicas)
    candidates = sorted(b for b in load if b not in skip)
    if not candidates:
        return None
    ring = sorted(load)
    start = ring.index(replicas[0]) if replicas and replicas[0] in ring else -1
    return min(candidates, key=lambda b: (load[b], (ring.index(b) - start - 1) % len(ring)))


def drain_plan(assignments: Assignment, removed: Iterable[int], remaining: Iterable[int]) -> dict[TopicPartition,
                                                                                                     list[int]]:
    """Move every replica off ``removed`` brokers, each onto the least-loaded remaining one
    (in place, so the partition's preferred leader changes only if it was removed)."""
    gone = set(removed)
    load = _loads(assignments, remaining)
    plan: dict[TopicPartition, list[int]] = {}
    for tp in sorted(assignments):
        replicas = list(assignments[tp])
        if not gone.intersection(replicas):
            continue
        for i, r in enumerate(replicas):
            if r in gone:
                target = _least_loaded(load, replicas)
                if target is None:
                    raise PlacementError(f"{tp[0]} partition {tp[1]} has {len(replicas)} replicas, more than the "
                                         f"{len(load)} brokers that remain")
                replicas[i] = target
                load[target] += 1
        plan[tp] = replicas
    return plan


def spread_plan(assignments: Assignment, brokers: Iterable[int]) -> dict[TopicPartition, list[int]]:
    """Even out replica counts over ``brokers`` (e.g. after new brokers joined): move replicas
    from the most to the least loaded broker until they differ by at most one. Followers move
    before leaders, so preferred leaders stay where they are when possible."""
    current = {tp: list(r) for tp, r in assignments.items()}
    load = _loads(current, brokers)
    if not load:
        return {}
    changed: set[TopicPartition] = set()
    while True:
        most = max(load, key=lambda b: (load[b], -b))
        least = min(load, key=lambda b: (load[b], b))
        if load[most] - load[least] <= 1:
            break
        # Candidates: partitions on `most` but not on `least`; a follower position first.
        best: tuple[int, TopicPartition] | None = None
        for tp in sorted(current):
            replicas = current[tp]
            if most in replicas and least not in replicas:
                position = replicas.index(most)
                rank = 0 if position > 0 else 1
                if best is None or rank < best[0]:
                    best = (rank, tp)
                    if rank == 0:
                        break
        if best is None:
            break
        tp = best[1]
        current[tp][current[tp].index(most)] = least
        load[most] -= 1
        load[least] += 1
        changed.add(tp)
    return {tp: current[tp] for tp in sorted(changed) if current[tp] != list(assignments[tp])}


def replication_plan(assignments: Assignment, replication_factor: int, brokers: Iterable[int],
                     cluster_load: Assignment | None = None) -> dict[TopicPartition, list[int]]:
    """Grow (add the least-loaded brokers at the end) or shrink (drop from the end, keeping the
    preferred leader) every partition of a topic to ``replication_factor`` replicas."""
    broker_list = sorted(set(brokers))
    if replication_factor > len(broker_list):
        raise PlacementError(f"replication factor {replication_factor} is larger than the "
                             f"{len(broker_list)} available brokers")
    load = _loads(cluster_load if cluster_load is not None else assignments, broker_list)
    plan: dict[TopicPartition, list[int]] = {}
    for tp in sorted(assignments):
        replicas = list(assignments[tp])
        while len(replicas) > replication_factor:
            load[replicas.pop()] -= 1
        while len(replicas) < replication_factor:
            target = _least_loaded(load, replicas)
            assert target is not None  # guaranteed by the broker count check
            replicas.append(target)
            load[target] += 1
        if replicas != list(assignments[tp]):
            plan[tp] = replicas
    return plan
