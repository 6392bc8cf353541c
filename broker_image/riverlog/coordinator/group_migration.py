"""Online migration between a classic group and a KIP-848 consumer group: the two conversions,
as Kafka's ``ConsumerGroup.fromClassicGroup`` and ``ClassicGroup.fromConsumerGroup`` make them.

*Upgrade*: the first ``group.protocol=consumer`` member joining a running classic group turns it
into a consumer group whose members are the classic ones, each at member epoch = the classic
generation, stable, holding (and targeted with) what its last SyncGroup gave it. They stay
classic members (``ConsumerMember.classic``): the coordinator answers their JoinGroup, SyncGroup
and Heartbeat from the consumer group's reconciliation (``classic_members.py``).

*Downgrade*: when the last consumer-protocol member leaves and only classic members remain, the
consumer group becomes a classic group again: Stable at generation = the group epoch, each
member's assignment its target, serialized in the version of its own subscription; the caller
then starts a rebalance, so everyone rejoins the classic way.

Pure functions: records and objects out, the caller writes and installs them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Set

from ..client.consumer_protocol import decode_assignment, decode_subscription, encode_assignment
from ..protocol.primitives import DecodeError
from .consumer_group import ConsumerGroup, ConsumerMember, MemberState
from .consumer_protocol import CONSUMER_PROTOCOL_TYPE
from .consumer_records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroupKey,
    ConsumerMemberKey,
    GroupEpochValue,
    PartitionMetadataValue,
    TargetEpochValue,
    TargetMemberValue,
    TopicMetadata,
)
from .group import ClassicGroup, GroupState, Member
from .records import CoordinatorRecord

# The newest ConsumerProtocolAssignment version; a member whose subscription is newer gets this.
MAX_ASSIGNMENT_VERSION = 3


class MigrationError(Exception):
    """The group cannot be converted (its embedded consumer protocol is unreadable)."""


def to_assignment(partitions: Mapping[str, tuple[int, ...]], topics: Mapping[str, TopicMetadata]) -> Assignment:
    """Topic names -> topic ids; partitions of topics the cluster does not know are left out."""
    out: Assignment = {}
    for name, parts in partitions.items():
        metadata = topics.get(name)
        if metadata is not None and parts:
            out[metadata.topic_id] = out.get(metadata.topic_id, frozenset()) | frozenset(parts)
    return out


def serialize_assignment(assignment: Assignment, topic_names: Mapping[uuid.UUID, str], subscription: bytes) -> bytes:
    """A ConsumerProtocolAssignment of ``assignment`` in the version of the member's subscription."""
    try:
        version = decode_subscription(subscription).version
    except DecodeError:
        version = 0
    by_name = {topic_names[t]: tuple(sorted(ps)) for t, ps in sorted(assignment.items()) if t in topic_names}
    return encode_assignment(by_name, version=min(max(version, 0), MAX_ASSIGNMENT_VERSION))


def consumer_group_records(classic: ClassicGroup, topics: Mapping[str, TopicMetadata],
                           now_ms: int) -> list[CoordinatorRecord]:
    """The records creating a consumer group that continues ``classic`` (in Kafka's order: the
    members' metadata, the group epoch, their targets, the target epoch, their current
    assignments; with Riverlog's partition metadata before the epoch). Raises MigrationError."""
    group_id, generation = classic.group_id, classic.generation_id
    members: list[ConsumerMember] = []
    subscribed: set[str] = set()
    for m in classic.members.values():
        # Every protocol of a member carries the same subscription; the group's chosen one if
        # it has one (a group in its very first rebalance has none yet).
        name = classic.protocol_name if classic.protocol_name is not None else m.protocols[0][0]
        try:
            subscription = decode_subscription(m.metadata(name))
            assigned = to_assignment(decode_assignment(m.assignment).partitions, topics)
        except (DecodeError, ValueError) as exc:
            raise MigrationError(str(exc)) from exc
        subscribed.update(subscription.topics)
        members.append(ConsumerMember(
            m.member_id, m.group_instance_id, subscription.rack_id, m.client_id, m.client_host,
            tuple(subscription.topics), None, m.rebalance_timeout_ms, None, member_epoch=generation,
            previous_member_epoch=generation, state=MemberState.STABLE, assigned=assigned,
            assignment_epochs={(t, p): generation for t, ps in assigned.items() for p in ps},
            classic=ClassicMemberMetadata(m.session_timeout_ms, m.protocols)))
    metadata = tuple(topics[n] for n in sorted(subscribed) if n in topics)
    return [
        *(CoordinatorRecord(ConsumerMemberKey(MEMBER_METADATA, group_id, m.member_id), m.metadata_value())
          for m in members),
        CoordinatorRecord(ConsumerGroupKey(PARTITION_METADATA, group_id), PartitionMetadataValue(metadata)),
        CoordinatorRecord(ConsumerGroupKey(GROUP_METADATA, group_id), GroupEpochValue(generation)),
        *(CoordinatorRecord(ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, group_id, m.member_id),
                            TargetMemberValue(m.assigned)) for m in members),
        CoordinatorRecord(ConsumerGroupKey(TARGET_ASSIGNMENT_METADATA, group_id), TargetEpochValue(generation, now_ms)),
        *(CoordinatorRecord(ConsumerMemberKey(CURRENT_MEMBER_ASSIGNMENT, group_id, m.member_id), m.assignment_value())
          for m in members),
    ]


def consumer_group_tombstones(group: ConsumerGroup) -> list[CoordinatorRecord]:
    """Every record of the group deleted, in Kafka's order (createGroupTombstoneRecords)."""
    gid, ids = group.group_id, list(group.members)
    return [
        *(CoordinatorRecord(ConsumerMemberKey(CURRENT_MEMBER_ASSIGNMENT, gid, m), None) for m in ids),
        *(CoordinatorRecord(ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, gid, m), None) for m in ids),
        CoordinatorRecord(ConsumerGroupKey(TARGET_ASSIGNMENT_METADATA, gid), None),
        *(CoordinatorRecord(ConsumerMemberKey(MEMBER_METADATA, gid, m), None) for m in ids),
        CoordinatorRecord(ConsumerGroupKey(PARTITION_METADATA, gid), None),
        CoordinatorRecord(ConsumerGroupKey(GROUP_METADATA, gid), None),
    ]


def classic_group_from(group: ConsumerGroup, leaving: Set[str], topic_names: Mapping[uuid.UUID, str],
                       now_ms: int) -> ClassicGroup:
    """The classic group that continues ``group`` without the members ``leaving`` (all the others
    are classic members): Stable at generation = the group epoch, the first member leading, each
    member's assignment its target."""
    classic = ClassicGroup(group.group_id, state=GroupState.STABLE, generation_id=group.group_epoch,
                           protocol_type=CONSUMER_PROTOCOL_TYPE, state_timestamp_ms=now_ms)
    for m in group.members.values():
        if m.member_id in leaving:
            continue
        if m.classic is None:
            raise ValueError(f"member {m.member_id} does not use the classic protocol")
        classic.add(Member(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                           m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, m.classic.protocols))
    classic.protocol_name = classic.select_protocol()
    classic.subscribed_topics = classic.compute_subscribed_topics()
    for member in classic.members.values():
        member.assignment = serialize_assignment(group.target.get(member.member_id, {}), topic_names,
                                                 member.metadata(classic.protocol_name))
    return classic
