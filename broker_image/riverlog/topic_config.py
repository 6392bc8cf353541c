"""Topic-level configs: their types, validation, and defaults taken from broker properties.

DescribeConfigs reports every entry here, marking which ones the topic overrides, so Kafka's
tools show the same table they show against Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from .config import BrokerConfig

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1


class ConfigType(IntEnum):
    """DescribeConfigs v3+ config_type values."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8  # a group-level config (resource type GROUP) set for the group


class InvalidConfig(ValueError):
    pass


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    doc: str
    # The broker property supplying the default and how to read it (None: fixed default).
    broker_default: Callable[[BrokerConfig], str] | None
    fixed_default: str = ""
    broker_key: str = ""
    check: Callable[[str], None] | None = None


def _in_range(lo: float, hi: float, parse: Callable[[str], float]) -> Callable[[str], None]:
    def check(value: str) -> None:
        try:
            n = parse(value)
        except ValueError:
            raise InvalidConfig(f"value {value!r} is not a number") from None
        if not lo <= n <= hi:
            raise InvalidConfig(f"value {n} must be between {lo} and {hi}")

    return check


def _int_range(lo: int, hi: int) -> Callable[[str], None]:
    return _in_range(lo, hi, int)


def _double(lo: float, hi: float) -> Callable[[str], None]:
    return _in_range(lo, hi, float)


def _one_of(*allowed: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        if value not in allowed:
            raise InvalidConfig(f"value {value!r} must be one of {', '.join(allowed)}")

    return check


def _list_of(*allowed: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        items = [v.strip() for v in value.split(",") if v.strip()]
        bad = [v for v in items if v not in allowed]
        if bad or not items:
            raise InvalidConfig(f"value {value!r} must be a list of {', '.join(allowed)}")

    return check


def _bool(value: str) -> None:
    if value.lower() not in ("true", "false"):
        raise InvalidConfig(f"value {value!r} must be true or false")


def _tiered_storage_off(value: str) -> None:
    _bool(value)
    if value.lower() == "true":
        raise InvalidConfig("tiered storage is not supported by Riverlog")


def _prop(key: str) -> Callable[[BrokerConfig], str]:
    return lambda cfg: cfg.get(key)


_DEFS = [
    TopicConfigDef("cleanup.policy", ConfigType.LIST, "delete and/or compact old segments",
                   _prop("log.cleanup.policy"), broker_key="log.cleanup.policy",
                   check=_list_of("delete", "compact")),
    TopicConfigDef("compression.type", ConfigType.STRING, "final compression type of the topic",
                   _prop("compression.type"), broker_key="compression.type",
                   check=_one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    TopicConfigDef("delete.retention.ms", ConfigType.LONG, "how long delete tombstones are kept",
                   _prop("log.cleaner.delete.retention.ms"), broker_key="log.cleaner.delete.retention.ms",
                   check=_int_range(0, LONG_MAX)),
    TopicConfigDef("file.delete.delay.ms", ConfigType.LONG, "delay before deleting a file",
                   _prop("log.segment.delete.delay.ms"), broker_key="log.segment.delete.delay.ms",
                   check=_int_range(0, LONG_MAX)),
    TopicConfigDef("flush.messages", ConfigType.LONG, "fsync after this many messages",
                   _prop("log.flush.interval.messages"), broker_key="log.flush.interval.messages",
                   check=_int_range(1, LONG_MAX)),
    TopicConfigDef("flush.ms", ConfigType.LONG, "fsync after this much time",
                   None, str(LONG_MAX), check=_int_range(0, LONG_MAX)),
    TopicConfigDef("index.interval.bytes", ConfigType.INT, "bytes between offset index entries",
                   _prop("log.index.interval.bytes"), broker_key="log.index.interval.bytes",
                   check=_int_range(0, INT_MAX)),
    TopicConfigDef("max.compaction.lag.ms", ConfigType.LONG, "maximum time a message stays uncompacted",
                   _prop("log.cleaner.max.compaction.lag.ms"), broker_key="log.cleaner.max.compaction.lag.ms",
                   check=_int_range(1, LONG_MAX)),
    TopicConfigDef("max.message.bytes", ConfigType.INT, "largest record batch size allowed",
                   _prop("message.max.bytes"), broker_key="message.max.bytes", check=_int_range(0, INT_MAX)),
    TopicConfigDef("message.timestamp.after.max.ms", ConfigType.LONG,
                   "how far in the future a timestamp may be",
                   _prop("log.message.timestamp.after.max.ms"),
                   broker_key="log.message.timestamp.after.max.ms", check=_int_range(0, LONG_MAX)),
    TopicConfigDef("message.timestamp.before.max.ms", ConfigType.LONG,
                   "how far in the past a timestamp may be",
                   _prop("log.message.timestamp.before.max.ms"),
                   broker_key="log.message.timestamp.before.max.ms", check=_int_range(0, LONG_MAX)),
    TopicConfigDef("message.timestamp.type", ConfigType.STRING, "CreateTime or LogAppendTime",
                   _prop("log.message.timestamp.type"), broker_key="log.message.timestamp.type",
                   check=_one_of("CreateTime", "LogAppendTime")),
    TopicConfigDef("min.cleanable.dirty.ratio", ConfigType.DOUBLE, "dirty ratio that triggers compaction",
                   _prop("log.cleaner.min.cleanable.ratio"), broker_key="log.cleaner.min.cleanable.ratio",
                   check=_double(0.0, 1.0)),
    TopicConfigDef("min.compaction.lag.ms", ConfigType.LONG, "minimum time a message stays uncompacted",
                   _prop("log.cleaner.min.compaction.lag.ms"), broker_key="log.cleaner.min.compaction.lag.ms",
                   check=_int_range(0, LONG_MAX)),
    TopicConfigDef("min.insync.replicas", ConfigType.INT, "replicas that must acknowledge acks=all",
                   _prop("min.insync.replicas"), broker_key="min.insync.replicas",
                   check=_int_range(1, INT_MAX)),
    TopicConfigDef("preallocate", ConfigType.BOOLEAN, "preallocate segment files", None, "false", check=_bool),
    TopicConfigDef("retention.bytes", ConfigType.LONG, "maximum partition size before deleting old segments",
                   _prop("log.retention.bytes"), broker_key="log.retention.bytes",
                   check=_int_range(-1, LONG_MAX)),
    TopicConfigDef("retention.ms", ConfigType.LONG, "maximum age of a segment before it is deleted",
                   lambda cfg: str(cfg.log_retention_ms()), broker_key="log.retention.ms",
                   check=_int_range(-1, LONG_MAX)),
    TopicConfigDef("segment.bytes", ConfigType.INT, "size at which a segment rolls",
                   _prop("log.segment.bytes"), broker_key="log.segment.bytes", check=_int_range(14, INT_MAX)),
    TopicConfigDef("segment.index.bytes", ConfigType.INT, "maximum offset index size",
                   _prop("log.index.size.max.bytes"), broker_key="log.index.size.max.bytes",
                   check=_int_range(4, INT_MAX)),
    TopicConfigDef("segment.jitter.ms", ConfigType.LONG, "random jitter subtracted from segment.ms",
                   None, "0", check=_int_range(0, LONG_MAX)),
    TopicConfigDef("segment.ms", ConfigType.LONG, "age at which a segment rolls",
                   lambda cfg: str(cfg.log_roll_ms()), broker_key="log.roll.ms", check=_int_range(1, LONG_MAX)),
    TopicConfigDef("unclean.leader.election.enable", ConfigType.BOOLEAN,
                   "allow out-of-sync replicas to become leader",
                   _prop("unclean.leader.election.enable"), broker_key="unclean.leader.election.enable",
                   check=_bool),
    TopicConfigDef("message.downconversion.enable", ConfigType.BOOLEAN, "kept for tool compatibility",
                   None, "true", check=_bool),
    # Kafka 4's remaining topic configs, so tools that copy a topic's whole config (MirrorMaker 2
    # syncs every one it reads from a Kafka source) are answered as Kafka would answer them.
    # Compression levels (KIP-390) are accepted with Kafka's ranges; Riverlog recompresses at
    # each codec's default level.
    TopicConfigDef("compression.gzip.level", ConfigType.INT, "gzip level when the broker compresses",
                   None, "-1", check=lambda v: None if v.strip() == "-1" else _int_range(1, 9)(v)),
    TopicConfigDef("compression.lz4.level", ConfigType.INT, "lz4 level when the broker compresses",
                   None, "9", check=_int_range(1, 17)),
    TopicConfigDef("compression.zstd.level", ConfigType.INT, "zstd level when the broker compresses",
                   None, "3", check=_int_range(-131072, 22)),
    TopicConfigDef("leader.replication.throttled.replicas", ConfigType.LIST,
                   "replicas throttled on the leader side during reassignment", None, ""),
    TopicConfigDef("follower.replication.throttled.replicas", ConfigType.LIST,
                   "replicas throttled on the follower side during reassignment", None, ""),
    # Tiered storage is not built: it may be named, never switched on (refused, not ignored).
    TopicConfigDef("remote.storage.enable", ConfigType.BOOLEAN, "tiered storage (not supported by Riverlog)",
                   None, "false", check=_tiered_storage_off),
    TopicConfigDef("local.retention.ms", ConfigType.LONG, "local retention with tiered storage",
                   None, "-2", check=_int_range(-2, LONG_MAX)),
    TopicConfigDef("local.retention.bytes", ConfigType.LONG, "local retention with tiered storage",
                   None, "-2", check=_int_range(-2, LONG_MAX)),
    TopicConfigDef("remote.log.copy.disable", ConfigType.BOOLEAN, "tiered storage copy switch",
                   None, "false", check=_bool),
    TopicConfigDef("remote.log.delete.on.disable", ConfigType.BOOLEAN, "tiered storage deletion switch",
                   None, "false", check=_bool),
]

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in _DEFS}


def validate_topic_configs(configs: Mapping[str, str | None]) -> None:
    """Raise InvalidConfig naming the first unknown key or bad value."""
    for key, value in configs.items():
        definition = TOPIC_CONFIGS.get(key)
        if definition is None:
            raise InvalidConfig(f"Unknown topic config name: {key}")
        if value is None:
            raise InvalidConfig(f"Null value not supported for topic config {key}")
        if definition.check:
            try:
                definition.check(value)
            except InvalidConfig as exc:
                raise InvalidConfig(f"Invalid value {value} for configuration {key}: {exc}") from None


def default_value(definition: TopicConfigDef, broker: BrokerConfig) -> str:
    if definition.broker_default is None:
        return definition.fixed_default
    return definition.broker_default(broker)


def effective_configs(overrides: Mapping[str, str], broker: BrokerConfig) -> dict[str, str]:
    """Every topic config's value: the topic's override, else the broker-derived default."""
    return {
        name: overrides.get(name, default_value(definition, broker))
        for name, definition in TOPIC_CONFIGS.items()
    }
