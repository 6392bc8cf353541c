"""The share-partitions a broker leads: one :class:`SharePartition` per (group, topic id,
partition), created on a group's first fetch from where ``share.auto.offset.reset`` says.

The state lives in this broker's memory: a share-partition starts afresh on the broker that
leads the partition after a move (records in flight here become available there only through
their lock expiring with this broker). Durable state through a share coordinator is the next
step (see "Share groups" in the design notes). Pure: the ShareFetch handler passes the log's
offsets and the time in.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from .partition import OffsetReset, SharePartition, ShareSettings

if TYPE_CHECKING:
    from ..config import BrokerConfig

ShareKey = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)


def share_settings(config: BrokerConfig) -> ShareSettings:
    return ShareSettings(
        record_lock_duration_ms=config.get_int("group.share.record.lock.duration.ms"),
        delivery_count_limit=config.get_int("group.share.delivery.count.limit"),
        max_record_locks=config.get_int("group.share.partition.max.record.locks"),
    )


class SharePartitionManager:
    def __init__(self, settings: ShareSettings, reset: OffsetReset = OffsetReset.LATEST) -> None:
        self.settings = settings
        self.reset = reset
        self.partitions: dict[ShareKey, SharePartition] = {}

    def get_or_create(self, key: ShareKey, log_start_offset: int, log_end_offset: int) -> SharePartition:
        part = self.partitions.get(key)
        if part is None:
            part = SharePartition.initialize(self.reset, log_start_offset, log_end_offset, self.settings)
            self.partitions[key] = part
        part.advance_log_start(log_start_offset)
        return part

    def get(self, key: ShareKey) -> SharePartition | None:
        return self.partitions.get(key)

    def release_member(self, group_id: str, member_id: str, now_ms: int) -> None:
        """A member's share session closed: what it holds on this broker is released."""
        for (group, _, _), part in self.partitions.items():
            if group == group_id:
                part.expire_locks(now_ms)
                part.release_member(member_id)

    def drop_partition(self, topic_id: uuid.UUID, partition: int) -> None:
        """This broker no longer leads the partition: its share state here is gone."""
        for key in [k for k in self.partitions if k[1] == topic_id and k[2] == partition]:
            del self.partitions[key]
