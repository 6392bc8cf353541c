"""A KIP-932 share group: its members, epochs and target assignment, and the simple assignor.

Share groups need none of a consumer group's reconciliation: a partition may be assigned to
several members at once (records, not partitions, are what members hold exclusively: see
``share/partition.py``), so nothing is revoked before it is assigned elsewhere. When the group
epoch moves (a member joins or leaves, a subscription or the subscribed topics change) the
target is recomputed, and each member takes its target and the assignment epoch at its next
heartbeat.

:func:`simple_assign` is modelled on Kafka's SimpleAssignor for members with the same
subscription: with at least as many partitions as members, each partition goes to one member
(round robin); with more members than partitions, every member gets one partition and each
partition is shared by several members, so every member has something to fetch. Members with
different subscriptions are assigned per topic among its subscribers the same way.

Pure data and functions: ``share_membership.py`` drives them and writes the records.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from .consumer_records import Assignment, TopicMetadata

LEAVE_EPOCH = -1
SIMPLE_ASSIGNOR = "simple"


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned: Assignment = field(default_factory=dict)


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    metadata_hash: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    # The subscribed topics' metadata as of the latest heartbeat (name -> metadata), what the
    # assignor works from; whether it changed is decided by ``metadata_hash`` (persisted).
    subscribed_topics: dict[str, TopicMetadata] = field(default_factory=dict)
    # Topics ever assigned here (topic id -> (name, partition count)): those whose share state
    # the group may have, deleted with it (record type 15).
    state_topics: dict[uuid.UUID, tuple[str, int]] = field(default_factory=dict)

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY


def simple_assign(members: Mapping[str, frozenset[uuid.UUID]],
                  topics: Mapping[uuid.UUID, TopicMetadata]) -> dict[str, Assignment]:
    """Each member id's partitions, given each member's subscribed topic ids."""
    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for topic_id, topic in sorted(topics.items(), key=lambda item: item[1].name):
        subscribers = sorted(m for m, subscribed in members.items() if topic_id in subscribed)
        if not subscribers or topic.num_partitions <= 0:
            continue
        partitions = list(range(topic.num_partitions))
        if len(partitions) >= len(subscribers):
            pairs = [(subscribers[i % len(subscribers)], p) for i, p in enumerate(partitions)]
        else:
            pairs = [(m, partitions[i % len(partitions)]) for i, m in enumerate(subscribers)]
        for member_id, partition in pairs:
            out[member_id].setdefault(topic_id, set()).add(partition)
    return {m: {t: frozenset(p) for t, p in parts.items()} for m, parts in out.items()}
