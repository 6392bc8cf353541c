"""Pure decisions of the controller: requests in, metadata records and per-item results out.

No I/O and no state of its own: the caller (local controller now, the Raft quorum controller
later) commits the records and applies them to its image.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..protocol.errors import ErrorCode
from ..topic_config import InvalidConfig, validate_topic_configs
from .image import TOPIC_RESOURCE, MetadataImage
from .placement import assign_replicas
from .records import ConfigRecord, PartitionRecord, Record, RemoveTopicRecord, TopicRecord
from .topic_names import CLUSTER_METADATA_TOPIC

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249
MAX_PARTITIONS = 100_000



@dataclass
class Outcome:
    """Result of one item of a batch request: error code + message, and the records it needs."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    records: list[Record] = field(default_factory=list)
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1


def topic_name_error(name: str) -> str | None:
    if not name:
        return "Topic name is empty"
    if name in (".", ".."):
        return "Topic name cannot be '.' or '..'"
    if len(name) > MAX_TOPIC_NAME:
        return f"Topic name is longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL.match(name):
        return f"Topic name {name!r} is illegal: use only ASCII letters, digits, '.', '_' and '-'"
    return None


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, Sequence[int]] = field(default_factory=dict)
    configs: Mapping[str, str | None] = field(default_factory=dict)


# Kafka's MAX_PARTITIONS_PER_BATCH: one CreateTopics may not ask for more partitions than this in
# all, so a single request cannot make the controller place (and every broker create) without bound.
MAX_PARTITIONS_PER_REQUEST = 10_000
EXCESSIVE_PARTITIONS = "Excessively large number of partitions per request."
# Kafka's MAX_RECORDS_PER_USER_OP: the records one admin request may commit (a topic record and one
# per partition make 10,000 partitions of one topic too many already).
MAX_RECORDS_PER_REQUEST = 10_000
TOO_MANY_RECORDS = "Unable to perform excessively large batch operation."


def requested_partitions(requests: Sequence[NewTopic], default_partitions: int) -> int:
    """All partitions a CreateTopics asks for, counted as Kafka counts them: an assignment's
    partitions, else num_partitions, else (-1) the default."""
    total = 0
    for req in requests:
        if req.assignments:
            total += len(req.assignments)
        elif req.num_partitions == -1:
            total += default_partitions
        elif req.num_partitions > 0:
            total += req.num_partitions
    return total


def live_brokers(image: MetadataImage) -> list[tuple[int, str | None]]:
    return [(b.broker_id, b.rack) for b in image.brokers.values() if not b.fenced]


def create_topic(
    image: MetadataImage,
    req: NewTopic,
    *,
    default_partitions: int,
    default_replication: int,
    start_index: int = 0,
) -> Outcome:
    if req.name == CLUSTER_METADATA_TOPIC:
        return Outcome(ErrorCode.INVALID_REQUEST, f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.")
    bad_name = topic_name_error(req.name)
    if bad_name:
        return Outcome(ErrorCode.INVALID_TOPIC_EXCEPTION, bad_name)
    if req.name in image.topics:
        return Outcome(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{req.name}' already exists.")
    try:
        validate_topic_configs(req.configs)
    except InvalidConfig as exc:
        return Outcome(ErrorCode.INVALID_CONFIG, str(exc))
    brokers = live_brokers(image)
    if req.assignments:
        if req.num_partitions != -1 or req.replication_factor != -1:
            return Outcome(ErrorCode.INVALID_REQUEST,
                           "Both numPartitions or replicationFactor and replicasAssignments were set.")
        if sorted(req.assignments) != list(range(len(req.assignments))):
            return Outcome(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           "Partitions in the assignment must be consecutive from 0")
        known = {b for b, _ in brokers}
        replica_lists = [list(req.assignments[p]) for p in range(len(req.assignments))]
        for replicas in replica_lists:
            if not replicas or len(set(replicas)) != len(replicas) or not set(replicas) <= known:
                return Outcome(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"Invalid replica assignment {replicas}: replicas must be distinct live brokers")
        if len({len(r) for r in replica_lists}) != 1:
            return Outcome(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           "All partitions must have the same number of replicas")
    else:
        partitions = default_partitions if req.num_partitions == -1 else req.num_partitions
        rf = default_replication if req.replication_factor == -1 else req.replication_factor
        if partitions <= 0 or partitions > MAX_PARTITIONS:
            return Outcome(ErrorCode.INVALID_PARTITIONS,
                           f"Number of partitions must be between 1 and {MAX_PARTITIONS}, got {partitions}.")
        if rf <= 0 or rf > 32767:
            return Outcome(ErrorCode.INVALID_REPLICATION_FACTOR, f"Replication factor must be larger than 0, got {rf}.")
        if rf > len(brokers):
            return Outcome(ErrorCode.INVALID_REPLICATION_FACTOR,
                           f"Unable to replicate the partition {rf} time(s): "
                           f"only {len(brokers)} broker(s) are registered.")
        replica_lists = assign_replicas(brokers, partitions, rf, start_index=start_index)

    topic_id = uuid.uuid4()
    records: list[Record] = [TopicRecord(req.name, topic_id)]
    for index, replicas in enumerate(replica_lists):
        records.append(PartitionRecord(topic_id, index, tuple(replicas), tuple(replicas), replicas[0]))
    for key, value in req.configs.items():
        records.append(ConfigRecord(TOPIC_RESOURCE, req.name, key, value))
    return Outcome(records=records, topic_id=topic_id, num_partitions=len(replica_lists),
                   replication_factor=len(replica_lists[0]))


def delete_topic(image: MetadataImage, name: str | None, topic_id: uuid.UUID | None) -> Outcome:
    topic = image.topics.get(name) if name else image.topic_by_id(topic_id) if topic_id else None
    if topic is None:
        if topic_id is not None and not name:
            return Outcome(ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
        return Outcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
    return Outcome(records=[RemoveTopicRecord(topic.topic_id)], topic_id=topic.topic_id)


def create_partitions(
    image: MetadataImage, name: str, count: int, assignments: Sequence[Sequence[int]] | None
) -> Outcome:
    topic = image.topics.get(name)
    if topic is None:
        return Outcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    current = len(topic.partitions)
    if count < current:
        return Outcome(ErrorCode.INVALID_PARTITIONS,
                       f"Topic currently has {current} partitions, which is higher than the requested {count}.")
    if count == current:
        return Outcome(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
    if count > MAX_PARTITIONS:
        return Outcome(ErrorCode.INVALID_PARTITIONS, f"Number of partitions must be at most {MAX_PARTITIONS}.")
    rf = len(next(iter(topic.partitions.values())).replicas)
    brokers = live_brokers(image)
    new = count - current
    if assignments:
        if len(assignments) != new:
            return Outcome(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"Increasing the number of partitions by {new} but {len(assignments)} assignments provided.")
        known = {b for b, _ in brokers}
        lists = [list(a) for a in assignments]
        for replicas in lists:
            if len(replicas) != rf or len(set(replicas)) != rf or not set(replicas) <= known:
                return Outcome(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"Invalid replica assignment {replicas} for a topic with replication factor {rf}")
    else:
        if rf > len(brokers):
            return Outcome(ErrorCode.INVALID_REPLICATION_FACTOR,
                           f"Only {len(brokers)} live brokers for replication factor {rf}")
        lists = assign_replicas(brokers, new, rf, first_partition=current)
    records: list[Record] = [
        PartitionRecord(topic.topic_id, current + i, tuple(r), tuple(r), r[0]) for i, r in enumerate(lists)
    ]
    return Outcome(records=records, topic_id=topic.topic_id, num_partitions=count)


def alter_topic_configs(
    image: MetadataImage, name: str, new_values: Mapping[str, str | None], *, replace_all: bool
) -> Outcome:
    """Records that make the topic's dynamic configs ``new_values`` (None deletes a key).

    ``replace_all`` is the legacy AlterConfigs semantics: keys not named are removed.
    """
    if name not in image.topics:
        return Outcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
    to_check = {k: v for k, v in new_values.items() if v is not None}
    try:
        validate_topic_configs(to_check)
    except InvalidConfig as exc:
        return Outcome(ErrorCode.INVALID_CONFIG, str(exc))
    current = image.topic_configs(name)
    records: list[Record] = []
    if replace_all:
        for key in current:
            if key not in new_values:
                records.append(ConfigRecord(TOPIC_RESOURCE, name, key, None))
    for key, value in new_values.items():
        if current.get(key) != value:
            records.append(ConfigRecord(TOPIC_RESOURCE, name, key, value))
    return Outcome(records=records)

