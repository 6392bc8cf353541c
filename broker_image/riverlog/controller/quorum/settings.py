"""The metadata quorum's settings, read from the broker config and checked as Kafka checks them."""

from __future__ import annotations

from ...config import BrokerConfig, ConfigError
from ..raft import RaftConfig


def snapshot_settings(config: BrokerConfig) -> tuple[int, int]:
    """(``metadata.log.max.record.bytes.between.snapshots``, ``metadata.log.max.snapshot.interval.ms``),
    checked as Kafka checks them."""
    max_bytes = config.get_int("metadata.log.max.record.bytes.between.snapshots")
    interval_ms = config.get_int("metadata.log.max.snapshot.interval.ms")
    if max_bytes < 1:
        raise ConfigError(f"metadata.log.max.record.bytes.between.snapshots must be at least 1, got {max_bytes}")
    if interval_ms < 0:
        raise ConfigError(f"metadata.log.max.snapshot.interval.ms must be at least 0, got {interval_ms}")
    return max_bytes, interval_ms


def raft_config(config: BrokerConfig) -> RaftConfig:
    request_timeout = config.get_int("controller.quorum.request.timeout.ms")
    fetch_timeout = config.get_int("controller.quorum.fetch.timeout.ms")
    return RaftConfig(
        election_timeout_ms=config.get_int("controller.quorum.election.timeout.ms"),
        fetch_timeout_ms=fetch_timeout,
        # Long polls end well before a request would be re-sent (RaftConfig checks it).
        fetch_max_wait_ms=max(1, min(500, request_timeout // 2, fetch_timeout // 2)),
        request_timeout_ms=request_timeout,
        check_quorum_timeout_ms=fetch_timeout * 3 // 2,
        resign_backoff_ms=config.get_int("controller.quorum.election.backoff.max.ms"),
    )


__all__ = ["raft_config", "snapshot_settings"]
