"""Pure controller decisions on partition reassignments (KIP-455, KRaft's rules): image in,
records and per-partition results out.

A reassignment moves a partition from its current replicas to a target list in three steps,
all of them ``PartitionChangeRecord``s:

1. **Start** (AlterPartitionReassignments): replicas become target + the replicas being removed
   (target first, so the preferred replica is the target's), ``adding`` = target - current,
   ``removing`` = current - target. Leader and ISR stay; the new replicas start fetching.
2. **Catch up**: the leader adds each new replica to the ISR once it has caught up
   (AlterPartition, as for any follower).
3. **Complete**, in the first change whose ISR holds every target replica (see
   ``partition_ops.completed_reassignment``): replicas = target, the removed replicas leave the
   ISR, a removed leader hands over, ``adding``/``removing`` are cleared. A reassignment that
   adds nobody (a shrink or a reordering) whose target is in sync completes in its start record.

Cancelling (``replicas`` null) reverts to the replicas before the reassignment (the current
ones without those being added); if only added replicas are in the ISR, reverting needs an
unclean election and is refused unless ``unclean.leader.election.enable`` allows it.

A new target while a reassignment is in progress is computed against the current replica list
(which holds both old and new replicas), as Kafka does; unlike Kafka, whose builder keeps the
old ``adding``/``removing`` when the new ones come out empty, the new target's sets replace the
old ones, so a target equal to the current replicas ends the reassignment as it stands.

Errors are Kafka's: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (an empty list, a
broker twice, a broker that is not registered; fenced brokers are allowed, as in Kafka),
INVALID_REPLICATION_FACTOR (version 1's ``allow_replication_factor_change=false`` and a target
of another size) and NO_REASSIGNMENT_IN_PROGRESS (cancelling what does not exist).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..protocol.errors import ErrorCode
from .image import MetadataImage, PartitionImage, TopicImage
from .partition_ops import (
    PartitionState,
    change_record,
    complete_if_possible,
    elect_among,
    unclean_election_enabled,
)
from .records import Record

# (topic, partition, target replicas or None to cancel)
ReassignmentItem = tuple[str, int, Sequence[int] | None]


@dataclass(frozen=True)
class ReassignmentResult:
    topic: str
    partition: int
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


@dataclass
class ReassignmentOutcome:
    results: list[ReassignmentResult] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)


@dataclass(frozen=True)
class OngoingReassignment:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def alter_partition_reassignments(
    image: MetadataImage, items: Sequence[ReassignmentItem], *, allow_replication_factor_change: bool = True,
    unclean_default: bool = False,
) -> ReassignmentOutcome:
    """Start, change or cancel the reassignment of each item; later items see earlier ones."""
    outcome = ReassignmentOutcome()
    for topic, partition, replicas in items:
        try:
            records = _alter_one(image, topic, partition, replicas, allow_replication_factor_change, unclean_default)
        except _Refused as refused:
            outcome.results.append(ReassignmentResult(topic, partition, refused.code, refused.message))
            continue
        outcome.records.extend(records)
        image = image.apply(records)
        outcome.results.append(ReassignmentResult(topic, partition))
    return outcome


def _alter_one(
    image: MetadataImage, name: str, partition: int, replicas: Sequence[int] | None, allow_rf_change: bool,
    unclean_default: bool,
) -> list[Record]:
    topic = image.topics.get(name)
    if topic is None:
        raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}.")
    part = topic.partitions.get(partition)
    if part is None:
        raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{partition}.")
    unclean = unclean_election_enabled(image, name, unclean_default)
    if replicas is None:
        target = _cancelled(topic, part, image.live_broker_ids(), unclean)
    else:
        target = _started(image, part, tuple(replicas), allow_rf_change, unclean)
    record = change_record(topic.topic_id, part, target)
    return [record] if record is not None else []


def _check_target(image: MetadataImage, replicas: tuple[int, ...]) -> None:
    if not replicas:
        raise _Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       "The manual partition assignment includes an empty replica list.")
    seen: set[int] = set()
    for broker_id in sorted(replicas):
        if broker_id not in image.brokers:
            raise _Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"The manual partition assignment includes broker {broker_id}, "
                           "but no such broker is registered.")
        if broker_id in seen:
            raise _Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"The manual partition assignment includes the broker {broker_id} more than once.")
        seen.add(broker_id)


def _replication_factor(part: PartitionImage) -> int:
    """The replica count the partition is headed for: its target's during a reassignment."""
    if not part.reassigning:
        return len(part.replicas)
    return len((set(part.replicas) | set(part.adding_replicas)) - set(part.removing_replicas))


def _started(
    image: MetadataImage, part: PartitionImage, target: tuple[int, ...], allow_rf_change: bool, unclean: bool
) -> PartitionState:
    _check_target(image, target)
    if not allow_rf_change and len(target) != _replication_factor(part):
        raise _Refused(ErrorCode.INVALID_REPLICATION_FACTOR,
                       f"The replication factor is changed from {_replication_factor(part)} to {len(target)}, "
                       "but allow_replication_factor_change is false.")
    current = part.replicas
    removing = tuple(sorted(set(current) - set(target)))
    adding = tuple(sorted(set(target) - set(current)))
    state = PartitionState(part.leader, part.isr, target + removing, adding, removing)
    live = image.live_broker_ids()
    if state.leader not in state.isr or state.leader not in live:
        # An offline partition: a live ISR replica (of the wider list) may lead now.
        leader, isr = elect_among(state.replicas, state.isr, live, unclean=False)
        state = PartitionState(leader, isr, state.replicas, adding, removing)
    # Adding nobody, with the target in sync: it completes at once.
    return complete_if_possible(state, live, unclean=unclean)


def _cancelled(topic: TopicImage, part: PartitionImage, live: frozenset[int], unclean: bool) -> PartitionState:
    if not part.reassigning:
        raise _Refused(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
    adding = set(part.adding_replicas)
    replicas = tuple(r for r in part.replicas if r not in adding)
    isr = tuple(r for r in part.isr if r not in adding)
    if not isr:
        # Only replicas being added are in sync: going back means trusting an out-of-sync one.
        if not unclean:
            raise _Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"Unable to revert partition assignment for {topic.name}:{part.partition} "
                           "because it would require an unclean leader election.")
        isr = replicas[:1]
    leader = part.leader
    if leader not in isr or leader not in live:
        leader, isr = elect_among(replicas, isr, live, unclean=unclean)
    return PartitionState(leader, isr, replicas)


def list_partition_reassignments(
    image: MetadataImage, wanted: Sequence[tuple[str, Sequence[int]]] | None = None
) -> list[OngoingReassignment]:
    """Reassignments in progress: all of them, or among the ``wanted`` (topic, partitions);
    unknown topics and partitions, and ones not reassigning, are left out (as Kafka does)."""
    out: list[OngoingReassignment] = []
    if wanted is None:
        selection = [(t, sorted(t.partitions)) for t in sorted(image.topics.values(), key=lambda t: t.name)]
    else:
        selection = [(image.topics[name], list(parts)) for name, parts in wanted if name in image.topics]
    for topic, partitions in selection:
        for index in partitions:
            part = topic.partitions.get(index)
            if part is not None and part.reassigning:
                out.append(OngoingReassignment(topic.name, index, part.replicas, part.adding_replicas,
                                               part.removing_replicas))
    return out
