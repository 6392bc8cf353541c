"""Per-log configuration: the subset of Kafka's topic configs the storage layer acts on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

DAY_MS = 24 * 3600 * 1000


@dataclass
class LogConfig:
    """Field names mirror Kafka's topic config keys with dots turned into underscores."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * DAY_MS
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * DAY_MS  # -1 = keep forever
    retention_bytes: int = -1  # -1 = no size limit
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"  # or "LogAppendTime"
    cleanup_policy: str = "delete"
    file_delete_delay_ms: int = 60000
    flush_messages: int | None = None
    # Broker-level in Kafka (producer.id.expiration.ms): idle idempotent producers are forgotten
    # after this long so their state does not grow without bound.
    producer_id_expiration_ms: int = DAY_MS

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def deletes(self) -> bool:
        """Whether retention applies: cleanup.policy is a list that may hold "delete" and/or "compact"."""
        return "delete" in (p.strip() for p in self.cleanup_policy.split(","))

    @classmethod
    def from_topic_configs(cls, configs: Mapping[str, str | None], base: LogConfig | None = None) -> LogConfig:
        """Build from Kafka-style keys (``segment.bytes`` ...); unknown keys are ignored, missing
        ones keep ``base``'s (or the default) value."""
        values = {f.name: getattr(base or cls(), f.name) for f in fields(cls)}
        for key, raw in configs.items():
            name = key.replace(".", "_")
            if name not in values or raw is None:
                continue
            current = values[name]
            if name in ("message_timestamp_type", "cleanup_policy"):
                values[name] = raw
            elif name == "flush_messages" or isinstance(current, int):
                values[name] = int(raw)
        return cls(**values)
