"""Settings of the group coordinator, read once from the broker's Kafka-named properties."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import DEFAULTS, BrokerConfig, ConfigError
from ..group_config import limits_from

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
    # KIP-848 consumer groups (group.protocol=consumer).
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_max_size: int = 2**31 - 1
    # Server-side assignors by name; the first is the default (group.consumer.assignors).
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # group.consumer.migration.policy: may a classic group become a consumer group when a
    # consumer-protocol member joins it (upgrade), and the other way when the last one leaves
    # (downgrade)? Kafka's values: disabled, upgrade, downgrade, bidirectional.
    consumer_migration_policy: str = "bidirectional"
    # KIP-932 share groups.
    share_session_timeout_ms: int = 45000
    share_heartbeat_interval_ms: int = 5000
    share_max_size: int = 200
    # The broker settings group-level configs are bounded by (group_config.limits_from).
    group_limits: Mapping[str, str] = field(default_factory=lambda: limits_from(DEFAULTS))

    @property
    def upgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("downgrade", "bidirectional")

    @property
    def classic_members_may_join_consumer_groups(self) -> bool:
        # Kafka refuses classic members of a consumer group only when migration is disabled.
        return self.consumer_migration_policy != "disabled"

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
            **_consumer_group_settings(config),
            share_session_timeout_ms=config.get_int("group.share.session.timeout.ms"),
            share_heartbeat_interval_ms=config.get_int("group.share.heartbeat.interval.ms"),
            share_max_size=config.get_int("group.share.max.size"),
            group_limits=limits_from(config.props),
        )


KNOWN_ASSIGNORS = ("uniform", "range")
MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")
# Kafka's assignor classes, accepted in group.consumer.assignors as in Kafka.
_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def _consumer_group_settings(config: BrokerConfig) -> dict[str, Any]:
    """The group.consumer.* settings, checked as Kafka's GroupCoordinatorConfig checks them."""
    session = config.get_int("group.consumer.session.timeout.ms")
    min_session = config.get_int("group.consumer.min.session.timeout.ms")
    max_session = config.get_int("group.consumer.max.session.timeout.ms")
    interval = config.get_int("group.consumer.heartbeat.interval.ms")
    min_interval = config.get_int("group.consumer.min.heartbeat.interval.ms")
    max_interval = config.get_int("group.consumer.max.heartbeat.interval.ms")
    if not min_session <= session <= max_session:
        raise ConfigError("group.consumer.session.timeout.ms must be between group.consumer.min.session.timeout.ms "
                          "and group.consumer.max.session.timeout.ms")
    if not min_interval <= interval <= max_interval:
        raise ConfigError("group.consumer.heartbeat.interval.ms must be between "
                          "group.consumer.min.heartbeat.interval.ms and group.consumer.max.heartbeat.interval.ms")
    if interval >= session:
        raise ConfigError("group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms")
    names = []
    for entry in config.get("group.consumer.assignors").split(","):
        name = _ASSIGNOR_CLASSES.get(entry.strip(), entry.strip())
        if name not in KNOWN_ASSIGNORS:
            raise ConfigError(f"group.consumer.assignors: unknown assignor {entry.strip()!r} "
                              f"(known: {', '.join(KNOWN_ASSIGNORS)})")
        names.append(name)
    if not names:
        raise ConfigError("group.consumer.assignors must name at least one assignor")
    policy = config.get("group.consumer.migration.policy").strip().lower()  # case-insensitive, as Kafka
    if policy not in MIGRATION_POLICIES:
        raise ConfigError(f"group.consumer.migration.policy must be one of {', '.join(MIGRATION_POLICIES)}, "
                          f"got {policy!r}")
    return {"consumer_session_timeout_ms": session, "consumer_migration_policy": policy,
            "consumer_heartbeat_interval_ms": interval,
            "consumer_max_size": config.get_int("group.consumer.max.size"),
            "consumer_assignors": tuple(names)}
