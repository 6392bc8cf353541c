"""Settings of the group coordinator, read once from the broker's Kafka-named properties."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import BrokerConfig

# Kafka's internal (non-configurable) limit on how long a new member's first JoinGroup may
# stay parked: such a member has no member id yet, so its session cannot expire it.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class GroupConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3_600_000
    offsets_retention_check_interval_ms: int = 600_000
    offsets_commit_timeout_ms: int = 5000
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024
    offsets_load_buffer_size: int = 5 * 1024 * 1024

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> GroupConfig:
        return cls(
            initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
            min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
            max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
            max_size=config.get_int("group.max.size"),
            offset_metadata_max_bytes=config.get_int("offset.metadata.max.bytes"),
            offsets_retention_ms=config.get_int("offsets.retention.minutes") * 60_000,
            offsets_retention_check_interval_ms=config.get_int("offsets.retention.check.interval.ms"),
            offsets_commit_timeout_ms=config.get_int("offsets.commit.timeout.ms"),
            offsets_topic_num_partitions=config.get_int("offsets.topic.num.partitions"),
            offsets_topic_replication_factor=config.get_int("offsets.topic.replication.factor"),
            offsets_topic_segment_bytes=config.get_int("offsets.topic.segment.bytes"),
            offsets_load_buffer_size=config.get_int("offsets.load.buffer.size"),
        )
