"""Pure controller decisions about brokers, partition leaders and ISRs: image in, records out.

Like ``topic_ops`` these functions do no I/O and keep no state; the local controller (and later
the Raft quorum controller) commits the records they return and applies them to its image.

Semantics, following KRaft before eligible leader replicas (KIP-966's ELR is not implemented):

- **Leaders** are chosen in replica order: the first replica that is in the ISR and live
  (registered and unfenced) wins, so the preferred (first) replica leads whenever it can.
- **Fencing** a broker removes it from every ISR it is in and moves away the leadership of the
  partitions it led. The ISR is never emptied: when the fenced broker is the last member it stays
  in the ISR and the partition goes offline (leader -1) until that broker returns, because it is
  the only replica known to hold every acknowledged record.
- **Unclean election** (``unclean.leader.election.enable``, false by default, per topic with the
  broker default as fallback) lets an offline partition be led by a live replica outside the ISR;
  the ISR then restarts as just that replica. Acknowledged records may be lost: that is the
  trade the setting makes.
- **Unfencing** a broker elects it for offline partitions whose ISR holds it. It does not put it
  back into any ISR: a returning replica is a follower until its leader sees it catch up and
  proposes the ISR expansion (AlterPartition).
- **AlterPartition** requests come from partition leaders and are checked as Kafka checks them:
  a stale broker epoch (the leader restarted since) fails the whole request with
  STALE_BROKER_EPOCH; per partition, an older leader epoch gets FENCED_LEADER_EPOCH, a newer one
  NOT_CONTROLLER (this controller has not caught up), a different partition epoch
  INVALID_UPDATE_VERSION (the leader decided on outdated state), an ISR holding fenced brokers or
  brokers whose registration changed since the leader saw them fetch INELIGIBLE_REPLICA (KIP-903),
  and an ISR without the leader or with non-replicas INVALID_REQUEST. The controller does not
  refuse shrinking an ISR below ``min.insync.replicas``: leaders refuse acks=all writes instead
  (NOT_ENOUGH_REPLICAS), as in Kafka without ELR.
- **Reassignments** (``reassignment.py`` starts and cancels them) complete in whichever change
  first gives them an ISR holding every target replica (usually the leader's AlterPartition
  adding the last new replica): replicas become the target, the removed replicas leave the ISR,
  and a leader that was removed hands over to the first live target replica in the ISR. That
  AlterPartition is answered NEW_LEADER_ELECTED, as Kafka does. A change that takes replicas
  away bumps the leader epoch even when the leader stays (Kafka's rule), so every replica sees it
  as a new epoch.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from ..protocol.errors import ErrorCode
from .image import MetadataImage, PartitionImage, TopicImage
from .records import BrokerRegistrationChangeRecord, Endpoint, PartitionChangeRecord, Record, RegisterBrokerRecord

NO_LEADER = -1
UNKNOWN_BROKER_EPOCH = -1

PREFERRED_ELECTION = 0
UNCLEAN_ELECTION = 1


# Leader election ---------------------------------------------------------------------------


def unclean_election_enabled(image: MetadataImage, topic: str, default: bool) -> bool:
    value = image.topic_configs(topic).get("unclean.leader.election.enable")
    return default if value is None else value.strip().lower() == "true"


def elect_leader(
    part: PartitionImage, isr: tuple[int, ...], live: frozenset[int], *, unclean: bool
) -> tuple[int, tuple[int, ...]]:
    """(leader, ISR) after an election among ``live`` brokers; (-1, isr) when nobody may lead."""
    return elect_among(part.replicas, isr, live, unclean=unclean)


def elect_among(
    replicas: tuple[int, ...], isr: tuple[int, ...], live: frozenset[int], *, unclean: bool
) -> tuple[int, tuple[int, ...]]:
    """Leader election over an explicit replica list (a reassignment's target, say)."""
    for replica in replicas:
        if replica in isr and replica in live:
            return replica, isr
    if unclean:
        for replica in replicas:
            if replica in live:
                return replica, (replica,)
    return NO_LEADER, isr


@dataclass(frozen=True)
class PartitionState:
    """A partition's leader, ISR and assignment as a change would leave them."""

    leader: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @classmethod
    def of(cls, part: PartitionImage) -> PartitionState:
        return cls(part.leader, part.isr, part.replicas, part.adding_replicas, part.removing_replicas)


def completed_reassignment(state: PartitionState) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(replicas, ISR) once the reassignment in ``state`` may complete, else None.

    It may when, the removed replicas left out, neither the replicas nor the ISR is empty and
    every target replica is in the ISR (KRaft's rule: an added replica only counts once it holds
    every committed record)."""
    if not state.adding and not state.removing:
        return None
    removing = set(state.removing)
    isr = tuple(r for r in state.isr if r not in removing)
    replicas = tuple(r for r in state.replicas if r not in removing)
    if not isr or not replicas or not set(replicas) <= set(isr):
        return None
    return replicas, isr


def complete_if_possible(state: PartitionState, live: frozenset[int], *, unclean: bool) -> PartitionState:
    """``state`` with its reassignment completed if it may be; a leader that is no longer a
    replica (or in the ISR) is replaced by the first live target replica in the ISR."""
    done = completed_reassignment(state)
    if done is None:
        return state
    replicas, isr = done
    leader = state.leader
    if leader not in isr or leader not in live:
        leader, isr = elect_among(replicas, isr, live, unclean=unclean)
    return PartitionState(leader, isr, replicas)


def change_record(topic_id: uuid.UUID, part: PartitionImage, target: PartitionState) -> PartitionChangeRecord | None:
    """The record taking ``part`` to ``target``, or None if nothing changes."""
    leader = None if target.leader == part.leader else target.leader
    if leader is None and not set(part.replicas) <= set(target.replicas):
        # Replicas leave: the leader epoch goes up even though the leader stays (Kafka does the
        # same), so the remaining replicas start a new epoch without the removed ones.
        leader = part.leader
    record = PartitionChangeRecord(
        topic_id, part.partition, leader=leader,
        isr=None if target.isr == part.isr else target.isr,
        replicas=None if target.replicas == part.replicas else target.replicas,
        adding_replicas=None if target.adding == part.adding_replicas else target.adding,
        removing_replicas=None if target.removing == part.removing_replicas else target.removing,
    )
    if record == PartitionChangeRecord(topic_id, part.partition):
        return None
    return record


def partition_change(
    topic_id: uuid.UUID, part: PartitionImage, *, leader: int | None = None, isr: tuple[int, ...] | None = None,
    live: frozenset[int] | None = None, unclean: bool = False,
) -> PartitionChangeRecord | None:
    """The record moving ``part`` to the given leader/ISR, or None if nothing changes. With
    ``live`` given, a reassignment the new ISR allows to complete completes in the same record."""
    state = PartitionState.of(part)
    state = PartitionState(part.leader if leader is None else leader, part.isr if isr is None else isr,
                           state.replicas, state.adding, state.removing)
    if live is not None:
        state = complete_if_possible(state, live, unclean=unclean)
    return change_record(topic_id, part, state)


def _replicas_on(image: MetadataImage, broker_id: int) -> Iterator[tuple[TopicImage, PartitionImage]]:
    for topic in image.topics.values():
        for part in topic.partitions.values():
            if broker_id in part.replicas:
                yield topic, part


# Broker lifecycle --------------------------------------------------------------------------


def _without_broker(image: MetadataImage, broker_id: int, unclean_default: bool) -> list[Record]:
    """Partition changes taking ``broker_id`` out of leadership and ISRs (it is going away)."""
    live = image.live_broker_ids() - {broker_id}
    records: list[Record] = []
    for topic, part in _replicas_on(image, broker_id):
        isr = part.isr
        if broker_id in isr and len(isr) > 1:
            isr = tuple(r for r in isr if r != broker_id)
        leader = part.leader
        unclean = unclean_election_enabled(image, topic.name, unclean_default)
        if leader == broker_id:
            leader, isr = elect_leader(part, isr, live, unclean=unclean)
        record = partition_change(topic.topic_id, part, leader=leader, isr=isr, live=live, unclean=unclean)
        if record is not None:
            records.append(record)
    return records


def fence_broker(image: MetadataImage, broker_id: int, *, unclean_default: bool = False) -> list[Record]:
    """Records fencing ``broker_id`` (missed heartbeats, a crash, or a controlled shutdown)."""
    broker = image.brokers.get(broker_id)
    if broker is None:
        return []
    records = _without_broker(image, broker_id, unclean_default)
    if not broker.fenced:
        records.append(BrokerRegistrationChangeRecord(broker_id, broker.epoch, True))
    return records


def unfence_broker(image: MetadataImage, broker_id: int, *, unclean_default: bool = False) -> list[Record]:
    """Records unfencing ``broker_id`` and electing it where a partition waits for it."""
    broker = image.brokers.get(broker_id)
    if broker is None:
        return []
    records: list[Record] = []
    if broker.fenced:
        records.append(BrokerRegistrationChangeRecord(broker_id, broker.epoch, False))
    live = image.live_broker_ids() | {broker_id}
    for topic, part in _replicas_on(image, broker_id):
        if part.leader != NO_LEADER and part.leader in live:
            continue
        unclean = unclean_election_enabled(image, topic.name, unclean_default)
        leader, isr = elect_leader(part, part.isr, live, unclean=unclean)
        record = partition_change(topic.topic_id, part, leader=leader, isr=isr, live=live, unclean=unclean)
        if record is not None:
            records.append(record)
    return records


def register_broker(
    image: MetadataImage, broker_id: int, incarnation_id: str, endpoints: Sequence[Endpoint], rack: str | None,
    *, unclean_default: bool = False,
) -> list[Record]:
    """Records registering a starting broker process (fenced until it asks to be unfenced).

    A new incarnation of a broker the controller still believes alive means the old process
    died without a controlled shutdown: it is fenced first (leadership moves, ISRs shrink), as
    its replicas may have lost an unflushed tail. The same incarnation registering again (a
    retried request) changes nothing.
    """
    current = image.brokers.get(broker_id)
    if current is not None and incarnation_id and current.incarnation_id == incarnation_id:
        return []
    records: list[Record] = []
    if current is not None:
        records.extend(_without_broker(image, broker_id, unclean_default))
    records.append(RegisterBrokerRecord(broker_id, tuple(endpoints), rack or None, True, incarnation_id))
    return records


# AlterPartition ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AlterPartitionRequest:
    """An ISR change a partition leader proposes, with the state it decided on."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    # The broker epoch each ISR member had when the leader last saw it fetch (KIP-903), in
    # new_isr's order; -1 (or a missing entry) means "not checked".
    broker_epochs: tuple[int, ...] = ()


@dataclass(frozen=True)
class AlterPartitionResult:
    """Per partition: the error, or the partition's state after the change."""

    topic_id: uuid.UUID
    partition: int
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    leader: int = NO_LEADER
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


@dataclass
class AlterPartitionOutcome:
    error: ErrorCode = ErrorCode.NONE  # request-level (STALE_BROKER_EPOCH)
    results: list[AlterPartitionResult] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)


def _ineligible(image: MetadataImage, req: AlterPartitionRequest) -> list[int]:
    out: list[int] = []
    for i, replica in enumerate(req.new_isr):
        broker = image.brokers.get(replica)
        epoch = req.broker_epochs[i] if i < len(req.broker_epochs) else UNKNOWN_BROKER_EPOCH
        if broker is None or broker.fenced or (epoch != UNKNOWN_BROKER_EPOCH and epoch != broker.epoch):
            out.append(replica)
    return out


def _check_alter(image: MetadataImage, broker_id: int, req: AlterPartitionRequest) -> AlterPartitionResult | None:
    """The error result for ``req``, or None if it may be applied."""
    def fail(code: ErrorCode, message: str) -> AlterPartitionResult:
        return AlterPartitionResult(req.topic_id, req.partition, code, message)

    topic = image.topic_by_id(req.topic_id)
    if topic is None:
        return fail(ErrorCode.UNKNOWN_TOPIC_ID, f"unknown topic id {req.topic_id}")
    part = topic.partitions.get(req.partition)
    if part is None:
        return fail(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic.name} has no partition {req.partition}")
    if req.leader_epoch < part.leader_epoch:
        return fail(ErrorCode.FENCED_LEADER_EPOCH,
                    f"leader epoch {req.leader_epoch} is older than the current {part.leader_epoch}")
    if req.leader_epoch > part.leader_epoch:
        return fail(ErrorCode.NOT_CONTROLLER,
                    f"leader epoch {req.leader_epoch} is newer than this controller's {part.leader_epoch}")
    if part.leader != broker_id:
        return fail(ErrorCode.INVALID_REQUEST, f"broker {broker_id} is not the leader (it is {part.leader})")
    if req.partition_epoch != part.partition_epoch:
        return fail(ErrorCode.INVALID_UPDATE_VERSION,
                    f"partition epoch {req.partition_epoch} is not the current {part.partition_epoch}")
    if broker_id not in req.new_isr:
        return fail(ErrorCode.INVALID_REQUEST, "the leader must be in the ISR it proposes")
    if len(set(req.new_isr)) != len(req.new_isr) or not set(req.new_isr) <= set(part.replicas):
        return fail(ErrorCode.INVALID_REQUEST,
                    f"ISR {list(req.new_isr)} is not a set of replicas {list(part.replicas)}")
    ineligible = _ineligible(image, req)
    if ineligible:
        return fail(ErrorCode.INELIGIBLE_REPLICA,
                    f"replicas {ineligible} are fenced or registered again since the leader saw them")
    return None


def alter_partition(
    image: MetadataImage, broker_id: int, broker_epoch: int, requests: Sequence[AlterPartitionRequest],
    *, unclean_default: bool = False,
) -> AlterPartitionOutcome:
    """Validate ISR changes proposed by the leader ``broker_id`` and return the records."""
    broker = image.brokers.get(broker_id)
    if broker is None or broker.epoch != broker_epoch:
        return AlterPartitionOutcome(ErrorCode.STALE_BROKER_EPOCH)
    outcome = AlterPartitionOutcome()
    live = image.live_broker_ids()
    for req in requests:
        failed = _check_alter(image, broker_id, req)
        if failed is not None:
            outcome.results.append(failed)
            continue
        topic = image.topic_by_id(req.topic_id)
        assert topic is not None
        record = partition_change(req.topic_id, topic.partitions[req.partition], isr=req.new_isr, live=live,
                                  unclean=unclean_election_enabled(image, topic.name, unclean_default))
        if record is not None:
            outcome.records.append(record)
            image = image.apply([record])  # later requests of the batch see this one
            topic = image.topic_by_id(req.topic_id)
            assert topic is not None
        part = topic.partitions[req.partition]
        if part.leader != broker_id:
            # The ISR change completed a reassignment that moved leadership away from the
            # requester: committed, but it must learn the new state from the metadata (Kafka).
            outcome.results.append(AlterPartitionResult(
                req.topic_id, req.partition, ErrorCode.NEW_LEADER_ELECTED,
                f"the reassignment completed and broker {part.leader} leads now"))
            continue
        outcome.results.append(AlterPartitionResult(req.topic_id, req.partition, ErrorCode.NONE, None, part.leader,
                                                    part.leader_epoch, part.isr, part.partition_epoch))
    return outcome


# ElectLeaders ------------------------------------------------------------------------------


@dataclass
class ElectionOutcome:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    records: list[Record] = field(default_factory=list)


def elect_leaders(image: MetadataImage, topic: str, partition: int, election_type: int) -> ElectionOutcome:
    """ElectLeaders for one partition: preferred (type 0) moves leadership to the first replica
    if it is live and in the ISR; unclean (type 1) elects a leader for an offline partition,
    out of the ISR if it must."""
    t = image.topics.get(topic)
    part = t.partitions.get(partition) if t is not None else None
    if t is None or part is None:
        return ElectionOutcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} does not exist")
    live = image.live_broker_ids()
    if election_type == PREFERRED_ELECTION:
        preferred = part.replicas[0]
        if part.leader == preferred:
            return ElectionOutcome(ErrorCode.ELECTION_NOT_NEEDED, "the preferred replica already leads")
        if preferred not in live or preferred not in part.isr:
            return ElectionOutcome(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                                   f"preferred replica {preferred} is not live and in the ISR")
        record = partition_change(t.topic_id, part, leader=preferred)
        return ElectionOutcome(records=[record] if record else [])
    if election_type == UNCLEAN_ELECTION:
        if part.leader in live:
            return ElectionOutcome(ErrorCode.ELECTION_NOT_NEEDED, "the partition has a live leader")
        leader, isr = elect_leader(part, part.isr, live, unclean=True)
        if leader == NO_LEADER:
            return ElectionOutcome(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no live replica")
        record = partition_change(t.topic_id, part, leader=leader, isr=isr, live=live, unclean=True)
        return ElectionOutcome(records=[record] if record else [])
    return ElectionOutcome(ErrorCode.INVALID_REQUEST, f"unknown election type {election_type}")
