"""The pure parts of ``riverlog mirror`` (issue #19): MirrorMaker 2's three connector configs from
the command's options, what a running mirror's configs say back (aliases, topic and group
filters, topic names on the target), MM2's checkpoint records decoded, per-partition status rows
and the record-by-record comparison of ``verify``.

Property names and defaults are MirrorMaker 2's in Kafka 4.3 (``MirrorSourceConfig``,
``MirrorCheckpointConfig``, ``DefaultTopicFilter``, ``DefaultGroupFilter``,
``DefaultReplicationPolicy``, ``Checkpoint``); the operator's ``builders/mirror.py`` writes the
same connectors from a ``Mirror`` resource.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

MM2_PACKAGE = "org.apache.kafka.connect.mirror"
BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"
DEFAULT_POLICY = f"{MM2_PACKAGE}.DefaultReplicationPolicy"  # <source alias>.<topic>
IDENTITY_POLICY = f"{MM2_PACKAGE}.IdentityReplicationPolicy"  # the same names
# The three connectors of one mirror are <name>-source, <name>-checkpoint and <name>-heartbeat.
ROLES = {"source": "MirrorSourceConnector", "checkpoint": "MirrorCheckpointConnector",
         "heartbeat": "MirrorHeartbeatConnector"}
# MM2's own exclusions (topics.exclude and groups.exclude defaults): its internal topics and
# Kafka's, and console consumers and Connect's own groups.
TOPICS_EXCLUDE = r"mm2.*\.internal, .*\.replica, __.*"
GROUPS_EXCLUDE = "console-consumer-.*, connect-.*, __.*"


def connector_names(name: str) -> dict[str, str]:
    """Role ("source", "checkpoint", "heartbeat") -> connector name."""
    return {role: f"{name}-{role}" for role in ROLES}


@dataclass(frozen=True)
class MirrorOptions:
    """What ``riverlog mirror start`` was asked for."""

    source_bootstrap: str
    target_bootstrap: str
    topics: str
    groups: str
    source_alias: str = "kafka"
    target_alias: str = "riverlog"
    identity: bool = False
    exactly_once: bool = False
    sync_interval_seconds: int = 60
    refresh_interval_seconds: int = 60
    offset_lag_max: int = 100
    # -1: the cluster's default.replication.factor, for every topic MM2 creates.
    replication_factor: int = -1
    extra: Mapping[str, str] = field(default_factory=dict)


def connector_configs(name: str, options: MirrorOptions) -> dict[str, dict[str, str]]:
    """Connector name -> the config to PUT to ``/connectors/<name>/config``; ``options.extra``
    (``--config KEY=VALUE``: security settings with the ``source.cluster.`` and
    ``target.cluster.`` prefixes, say) goes into all three and wins."""
    rf = str(options.replication_factor)
    interval = str(options.sync_interval_seconds)
    refresh = str(options.refresh_interval_seconds)
    shared = {
        "source.cluster.alias": options.source_alias,
        "target.cluster.alias": options.target_alias,
        "source.cluster.bootstrap.servers": options.source_bootstrap,
        "target.cluster.bootstrap.servers": options.target_bootstrap,
        "replication.policy.class": IDENTITY_POLICY if options.identity else DEFAULT_POLICY,
        # Records are copied as they are: bytes in, bytes out, headers too.
        "key.converter": BYTE_ARRAY_CONVERTER,
        "value.converter": BYTE_ARRAY_CONVERTER,
        "header.converter": BYTE_ARRAY_CONVERTER,
        "topics": options.topics,
    }
    own: dict[str, dict[str, str]] = {
        "source": {
            "tasks.max": "1", "replication.factor": rf, "offset-syncs.topic.replication.factor": rf,
            "refresh.topics.interval.seconds": refresh, "sync.topic.configs.interval.seconds": refresh,
            "offset.lag.max": str(options.offset_lag_max),
        },
        "checkpoint": {
            "tasks.max": "1", "groups": options.groups, "checkpoints.topic.replication.factor": rf,
            "sync.group.offsets.enabled": "true", "emit.checkpoints.interval.seconds": interval,
            "sync.group.offsets.interval.seconds": interval, "refresh.groups.interval.seconds": refresh,
        },
        "heartbeat": {"tasks.max": "1", "heartbeats.topic.replication.factor": rf},
    }
    if options.exactly_once:
        # MirrorSourceConnector refuses exactly.once.support=required unless its consumer reads
        # committed records only; the worker needs exactly.once.source.support=enabled.
        own["source"].update({"exactly.once.support": "required",
                              "source.consumer.isolation.level": "read_committed"})
    names = connector_names(name)
    return {names[role]: {**shared, **own[role], **options.extra,
                          "connector.class": f"{MM2_PACKAGE}.{cls}", "name": names[role]}
            for role, cls in ROLES.items()}


def compile_filter(include: str, exclude: str) -> Callable[[str], bool]:
    """MM2's topic and group filters: comma-separated regexes, each matching a whole name."""
    def pattern(text: str) -> re.Pattern[str] | None:
        parts = [p.strip() for p in text.split(",") if p.strip()]
        return re.compile("|".join(f"(?:{p})" for p in parts)) if parts else None

    included, excluded = pattern(include), pattern(exclude)
    return lambda name: (included is not None and included.fullmatch(name) is not None
                         and (excluded is None or excluded.fullmatch(name) is None))


@dataclass(frozen=True)
class RunningMirror:
    """What a mirror's connector configs say, as ``status`` and ``verify`` need it."""

    source_alias: str
    target_alias: str
    source_bootstrap: str
    target_bootstrap: str
    topics: str
    topics_exclude: str
    groups: str
    groups_exclude: str
    identity: bool
    separator: str = "."

    @classmethod
    def from_configs(cls, source: Mapping[str, str], checkpoint: Mapping[str, str] | None) -> RunningMirror:
        checkpoint = checkpoint or {}
        return cls(
            source_alias=source.get("source.cluster.alias", ""),
            target_alias=source.get("target.cluster.alias", ""),
            source_bootstrap=source.get("source.cluster.bootstrap.servers", ""),
            target_bootstrap=source.get("target.cluster.bootstrap.servers", ""),
            topics=source.get("topics", ".*"),
            topics_exclude=source.get("topics.exclude", TOPICS_EXCLUDE),
            groups=checkpoint.get("groups", ".*"),
            groups_exclude=checkpoint.get("groups.exclude", GROUPS_EXCLUDE),
            identity=source.get("replication.policy.class", DEFAULT_POLICY) == IDENTITY_POLICY,
            separator=source.get("replication.policy.separator", "."),
        )

    def target_topic(self, topic: str) -> str:
        return topic if self.identity else f"{self.source_alias}{self.separator}{topic}"

    @property
    def checkpoints_topic(self) -> str:
        """Where the checkpoint connector writes on the target (either policy)."""
        return f"{self.source_alias}.checkpoints.internal"

    def mirrored_topics(self, names: Iterable[str]) -> list[str]:
        keep = compile_filter(self.topics, self.topics_exclude)
        return sorted(n for n in names if keep(n))

    def mirrored_groups(self, names: Iterable[str]) -> list[str]:
        keep = compile_filter(self.groups, self.groups_exclude)
        return sorted(n for n in names if keep(n))


# --- checkpoints ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Checkpoint:
    """One record of ``<alias>.checkpoints.internal``: a group's committed source offset
    (``upstream``) and its translation on the target (``downstream``), for the target topic."""

    group: str
    topic: str
    partition: int
    upstream: int
    downstream: int
    metadata: str


def _read_string(data: bytes, pos: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", data, pos)
    pos += 2
    if length < 0:
        return "", pos
    return data[pos:pos + length].decode(), pos + length


def decode_checkpoint(key: bytes, value: bytes) -> Checkpoint:
    """Kafka's ``Checkpoint`` serialization: key (group STRING, topic STRING, partition INT32);
    value a version INT16, then (upstreamOffset INT64, offset INT64, metadata STRING).
    Raises ValueError on anything else."""
    try:
        group, pos = _read_string(key, 0)
        topic, pos = _read_string(key, pos)
        (partition,) = struct.unpack_from(">i", key, pos)
        (version,) = struct.unpack_from(">h", value, 0)
        if version != 0:
            raise ValueError(f"checkpoint version {version} is not 0")
        upstream, downstream = struct.unpack_from(">qq", value, 2)
        metadata, _ = _read_string(value, 18)
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"not a MirrorMaker 2 checkpoint: {exc}") from None
    return Checkpoint(group, topic, partition, upstream, downstream, metadata)


def encode_checkpoint(cp: Checkpoint) -> tuple[bytes, bytes]:
    """The inverse of :func:`decode_checkpoint` (Kafka's layout), for tests and tools."""
    def string(text: str) -> bytes:
        raw = text.encode()
        return struct.pack(">h", len(raw)) + raw

    key = string(cp.group) + string(cp.topic) + struct.pack(">i", cp.partition)
    return key, struct.pack(">hqq", 0, cp.upstream, cp.downstream) + string(cp.metadata)


# --- status rows ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionStatus:
    topic: str
    partition: int
    source_start: int
    source_end: int
    mirrored: int | None  # the next source offset the mirror will copy (None: nothing copied yet)
    target_topic: str
    target_end: int | None  # None: the topic or partition is not on the target yet

    @property
    def lag(self) -> int:
        """Source records not copied yet (counting transaction markers, which are never copied:
        a transactional source shows a lag of 1 per transaction not followed by a record)."""
        position = self.source_start if self.mirrored is None else max(self.mirrored, self.source_start)
        return max(0, self.source_end - position)


def mirrored_positions(offsets: Sequence[Mapping[str, object]], alias: str) -> dict[tuple[str, int], int]:
    """The source connector's committed offsets (``GET /connectors/<n>/offsets``: partition
    ``{cluster, topic, partition}``, offset ``{offset}``, the last copied source offset) as
    next-offset-to-copy by source partition."""
    out: dict[tuple[str, int], int] = {}
    for entry in offsets:
        part, off = entry.get("partition"), entry.get("offset")
        if not isinstance(part, Mapping) or not isinstance(off, Mapping):
            continue
        if part.get("cluster") != alias or not isinstance(off.get("offset"), int):
            continue
        out[(str(part.get("topic")), int(str(part.get("partition"))))] = int(str(off["offset"])) + 1
    return out


@dataclass(frozen=True)
class GroupStatus:
    group: str
    topic: str  # the source topic
    partition: int
    source_committed: int
    checkpoint: Checkpoint | None  # the newest for the target topic partition
    target_committed: int | None
    settled: bool = False  # a "settling" state seen unchanged for two checkpoint intervals

    @property
    def state(self) -> str:
        """translated: MM2's newest checkpoint is of the group's current source offset and the
        group's offset on the target is at least its translation. settling: the checkpoint is
        of an earlier commit; MM2 emits a new one only when the translation moves forward, so
        once it has stayed so for two checkpoint intervals (``settled``) it is translated too.
        pending: no checkpoint yet, or the target offset not synced yet."""
        cp = self.checkpoint
        if cp is None or cp.upstream > self.source_committed:
            return "pending"
        if self.target_committed is None or self.target_committed < cp.downstream:
            return "pending"
        if cp.upstream == self.source_committed or self.settled:
            return "translated"
        return "settling"

    @property
    def key(self) -> tuple[object, ...]:
        """What must stay the same for a settling translation to settle."""
        return (self.group, self.topic, self.partition, self.source_committed, self.checkpoint, self.target_committed)


# --- verify -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    source_records: int
    in_order: int  # source records found on the target in source order (from the first on)
    absent: int  # source records not on the target at all
    duplicates: int  # records on the target that repeat a source record copied before (re-sends)
    target_only: int  # records on the target that are not the source's (written there directly)
    first_missing: int | None  # index (from the source's first record) of the first not found in order

    @property
    def ok(self) -> bool:
        return self.in_order == self.source_records


def compare(source: Sequence[bytes], target: Sequence[bytes]) -> Comparison:
    """Is ``source`` (record digests in offset order) found on the target in the same order?

    Walks the target once, matching the next source record it waits for: MM2 copies at least
    once, so after a restart it re-sends a run of records already copied (counted as duplicates);
    producers moved to the target add records of their own (target only), interleaved with the
    mirror's last copies. Once a source record is not found, the rest cannot be matched in
    order; ``absent`` then tells how many are not on the target at all.
    """
    seen: set[bytes] = set()
    matched = duplicates = target_only = 0
    for digest in target:
        if matched < len(source) and digest == source[matched]:
            seen.add(digest)
            matched += 1
        elif digest in seen:
            duplicates += 1
        else:
            target_only += 1
    on_target = set(target)
    absent = sum(1 for d in source[matched:] if d not in on_target)
    return Comparison(len(source), matched, absent, duplicates, target_only,
                      None if matched == len(source) else matched)
