"""Committed offsets of the groups of one ``__consumer_offsets`` partition.

An offset becomes visible here only once its record is durable in the log (the coordinator
applies it when the write completes, and when it replays the log), so a fetch never returns
an offset that a crash could still take back.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from .records import OffsetCommitValue


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int  # -1: unknown
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int  # -1: none (set only by commits that gave a retention time)
    # Where its record stands in the partition's log order (a counter the shard keeps, in log
    # order): a transactional offset that commits replaces a committed offset only if it was
    # written after it, as Kafka compares record offsets. Not part of the offset's value.
    record_position: int = field(default=-1, compare=False)

    @classmethod
    def from_value(cls, value: OffsetCommitValue, record_position: int = -1) -> OffsetAndMetadata:
        return cls(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                   value.expire_timestamp, record_position)

    def to_value(self) -> OffsetCommitValue:
        return OffsetCommitValue(self.offset, self.metadata, self.commit_timestamp_ms, self.leader_epoch,
                                 self.expire_timestamp_ms)

    def is_expired(self, now_ms: int, base_timestamp_ms: int, retention_ms: int) -> bool:
        if self.expire_timestamp_ms >= 0:
            # Old clients set a per-commit retention: it wins, as in Kafka.
            return now_ms >= self.expire_timestamp_ms
        return now_ms - base_timestamp_ms >= retention_ms


class OffsetStore:
    def __init__(self) -> None:
        self._by_group: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}

    def get(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._by_group.get(group, {}).get(topic, {}).get(partition)

    def put(self, group: str, topic: str, partition: int, value: OffsetAndMetadata) -> None:
        self._by_group.setdefault(group, {}).setdefault(topic, {})[partition] = value

    def remove(self, group: str, topic: str, partition: int) -> bool:
        topics = self._by_group.get(group)
        if topics is None or partition not in topics.get(topic, {}):
            return False
        del topics[topic][partition]
        if not topics[topic]:
            del topics[topic]
        if not topics:
            del self._by_group[group]
        return True

    def has_group(self, group: str) -> bool:
        return group in self._by_group

    def group_offsets(self, group: str) -> dict[str, dict[int, OffsetAndMetadata]]:
        return self._by_group.get(group, {})

    def groups(self) -> list[str]:
        return list(self._by_group)

    def entries(self, group: str) -> Iterator[tuple[str, int, OffsetAndMetadata]]:
        for topic, partitions in list(self._by_group.get(group, {}).items()):
            for partition, value in list(partitions.items()):
                yield topic, partition, value

    def all_entries(self) -> Iterator[tuple[str, str, int, OffsetAndMetadata]]:
        for group in list(self._by_group):
            for topic, partition, value in self.entries(group):
                yield group, topic, partition, value

    def __len__(self) -> int:
        return sum(len(p) for topics in self._by_group.values() for p in topics.values())
