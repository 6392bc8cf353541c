"""Server-side assignors of KIP-848 consumer groups (``group.consumer.assignors``): ``uniform``
and ``range``. Pure functions from the members' subscriptions and the topics' metadata to a
target assignment; the coordinator calls one whenever the group epoch moves past the target's.

- ``uniform`` (Kafka's default): every partition to one subscribed member, counts as even as
  the subscriptions allow, moving as few partitions as it can from the previous target
  (sticky), and among equally loaded members preferring one in a rack that holds a replica
  (KIP-881's rack awareness, so consumers read from a replica in their rack).
- ``range``: per topic, the subscribed members in member id order each take a contiguous range
  of partitions, the first ones one more when they do not divide evenly (co-partitioned topics
  land together, as with the classic range assignor).

Outputs are deterministic for the same inputs: members, topics and partitions are walked in
sorted order.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .consumer_records import Assignment, TopicMetadata

TopicPartition = tuple[uuid.UUID, int]


@dataclass(frozen=True)
class MemberSpec:
    """What an assignor knows of one member."""

    subscribed: frozenset[uuid.UUID]  # topic ids
    rack: str | None = None
    previous: Assignment = field(default_factory=dict)  # its partitions in the previous target


Assignor = Callable[[Mapping[str, MemberSpec], Mapping[uuid.UUID, TopicMetadata]], dict[str, Assignment]]


def _to_assignment(partitions: set[TopicPartition]) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for topic_id, partition in partitions:
        out.setdefault(topic_id, set()).add(partition)
    return {t: frozenset(p) for t, p in out.items()}


def uniform(members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, TopicMetadata]) -> dict[str, Assignment]:
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    candidates: dict[TopicPartition, list[str]] = {}
    for topic_id in sorted(topics):
        subscribers = sorted(m for m, spec in members.items() if topic_id in spec.subscribed)
        if subscribers:
            for p in range(topics[topic_id].num_partitions):
                candidates[(topic_id, p)] = subscribers
    # Keep what each member had (still subscribed, partition still there): stickiness.
    taken: set[TopicPartition] = set()
    for member_id in sorted(members):
        for topic_id, parts in members[member_id].previous.items():
            for p in parts:
                tp = (topic_id, p)
                if tp in candidates and member_id in candidates[tp] and tp not in taken:
                    owned[member_id].add(tp)
                    taken.add(tp)

    def racks_of(tp: TopicPartition) -> tuple[str, ...]:
        racks = topics[tp[0]].racks
        return racks[tp[1]] if tp[1] < len(racks) else ()

    def pick(tp: TopicPartition, among: list[str]) -> str:
        racks = racks_of(tp)
        return min(among, key=lambda m: (len(owned[m]), members[m].rack not in racks if racks else False, m))

    # Hand out the rest, the most constrained partitions first.
    for tp in sorted((tp for tp in candidates if tp not in taken), key=lambda tp: (len(candidates[tp]), tp)):
        owned[pick(tp, candidates[tp])].add(tp)
    _balance(owned, candidates)
    return {m: _to_assignment(tps) for m, tps in owned.items()}


def _balance(owned: dict[str, set[TopicPartition]], candidates: Mapping[TopicPartition, list[str]]) -> None:
    """Move partitions from the most to the least loaded members that may take them, until no
    move makes two members' counts closer (each move lowers the sum of squared counts, so this
    ends)."""
    while True:
        moved = False
        for giver in sorted(owned, key=lambda m: (-len(owned[m]), m)):
            for tp in sorted(owned[giver]):
                takers = [m for m in candidates[tp] if len(owned[m]) + 1 < len(owned[giver])]
                if takers:
                    taker = min(takers, key=lambda m: (len(owned[m]), m))
                    owned[giver].discard(tp)
                    owned[taker].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return


def range_assignor(members: Mapping[str, MemberSpec],
                   topics: Mapping[uuid.UUID, TopicMetadata]) -> dict[str, Assignment]:
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    for topic_id in sorted(topics):
        subscribers = sorted(m for m, spec in members.items() if topic_id in spec.subscribed)
        if not subscribers:
            continue
        count = topics[topic_id].num_partitions
        per, extra = divmod(count, len(subscribers))
        start = 0
        for i, member_id in enumerate(subscribers):
            size = per + (1 if i < extra else 0)
            owned[member_id].update((topic_id, p) for p in range(start, start + size))
            start += size
    return {m: _to_assignment(tps) for m, tps in owned.items()}


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_assignor}
