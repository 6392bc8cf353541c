"""Per-log configuration: the subset of Kafka's topic configs the storage layer acts on."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, fields

DAY_MS = 24 * 3600 * 1000
LONG_MAX = (1 << 63) - 1


@functools.lru_cache(maxsize=64)
def _policies(cleanup_policy: str) -> frozenset[str]:
    # Parsed once per spelling: the cleaner and retention ask every partition's log, often.
    return frozenset(p.strip() for p in cleanup_policy.split(","))


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
    # Compaction (cleanup.policy containing "compact"), see cleaner.py.
    delete_retention_ms: int = DAY_MS
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def deletes(self) -> bool:
        """Whether retention applies: cleanup.policy is a list that may hold "delete" and/or "compact"."""
        return "delete" in _policies(self.cleanup_policy)

    @property
    def compacts(self) -> bool:
        """Whether the log cleaner keeps only the latest record per key (cleanup.policy "compact")."""
        return "compact" in _policies(self.cleanup_policy)

    @property
    def roll_ms(self) -> int:
        """segment.ms, shortened to max.compaction.lag.ms on compacted logs (as Kafka does): records
        in the active segment cannot be cleaned, so it must roll for the lag bound to hold."""
        if self.compacts and 0 < self.max_compaction_lag_ms < self.segment_ms:
            return self.max_compaction_lag_ms
        return self.segment_ms

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
            elif isinstance(current, float):
                values[name] = float(raw)
            elif name == "flush_messages" or isinstance(current, int):
                values[name] = int(raw)
        return cls(**values)
