"""The server-side assignors of KIP-848 consumer groups: ``uniform`` (balanced, sticky, rack
aware) and ``range``."""

from __future__ import annotations

import uuid

import pytest
from riverlog.coordinator.consumer_assignors import MemberSpec, range_assignor, uniform
from riverlog.coordinator.consumer_records import TopicMetadata

pytestmark = pytest.mark.unit

A = TopicMetadata(uuid.UUID(int=1), "a", 6)
B = TopicMetadata(uuid.UUID(int=2), "b", 3)
TOPICS = {A.topic_id: A, B.topic_id: B}


def counts(result: dict[str, dict[uuid.UUID, frozenset[int]]]) -> dict[str, int]:
    return {m: sum(len(p) for p in a.values()) for m, a in result.items()}


def every_partition_once(result: dict[str, dict[uuid.UUID, frozenset[int]]], *topics: TopicMetadata) -> bool:
    seen = [(t, p) for a in result.values() for t, parts in a.items() for p in parts]
    return sorted(seen) == sorted((t.topic_id, p) for t in topics for p in range(t.num_partitions))


def test_uniform_balances_and_sticks() -> None:
    both = frozenset(TOPICS)
    first = uniform({"m1": MemberSpec(both), "m2": MemberSpec(both)}, TOPICS)
    assert every_partition_once(first, A, B) and sorted(counts(first).values()) == [4, 5]
    # A third member takes partitions from the others; nobody else's partitions move.
    members = {m: MemberSpec(both, previous=first[m]) for m in first} | {"m3": MemberSpec(both)}
    second = uniform(members, TOPICS)
    assert every_partition_once(second, A, B) and sorted(counts(second).values()) == [3, 3, 3]
    for m in ("m1", "m2"):
        for topic_id, parts in second[m].items():
            assert parts <= first[m].get(topic_id, frozenset())


def test_uniform_heterogeneous_subscriptions() -> None:
    result = uniform({"m1": MemberSpec(frozenset({A.topic_id})),
                      "m2": MemberSpec(frozenset({A.topic_id, B.topic_id}))}, TOPICS)
    assert every_partition_once(result, A, B)
    assert B.topic_id not in result["m1"]
    assert sorted(counts(result).values()) == [4, 5]


def test_uniform_prefers_members_in_a_replica_rack() -> None:
    racked = TopicMetadata(uuid.UUID(int=3), "r", 4, (("east",), ("west",), ("east",), ("west",)))
    result = uniform({"e": MemberSpec(frozenset({racked.topic_id}), rack="east"),
                      "w": MemberSpec(frozenset({racked.topic_id}), rack="west")}, {racked.topic_id: racked})
    assert result["e"] == {racked.topic_id: frozenset({0, 2})}
    assert result["w"] == {racked.topic_id: frozenset({1, 3})}


def test_range_gives_contiguous_ranges_per_topic() -> None:
    both = frozenset(TOPICS)
    result = range_assignor({"m2": MemberSpec(both), "m1": MemberSpec(both)}, TOPICS)
    assert result["m1"] == {A.topic_id: frozenset({0, 1, 2}), B.topic_id: frozenset({0, 1})}
    assert result["m2"] == {A.topic_id: frozenset({3, 4, 5}), B.topic_id: frozenset({2})}
