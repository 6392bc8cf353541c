"""A KIP-848 consumer group (``group.protocol=consumer``): its members, epochs, target
assignment, and the reconciliation of one member towards its target.

The protocol in three epochs: the *group epoch* moves whenever membership or subscriptions (or
the subscribed topics' metadata) change; the *assignment epoch* is the group epoch the target
assignment was last computed for; each member's *member epoch* reaches the assignment epoch once
the member holds exactly its target. :func:`reconcile` (Kafka's CurrentAssignmentBuilder) moves a
member one step: partitions it must give up are revoked first (it stays at its epoch, state
UNREVOKED_PARTITIONS, until a heartbeat no longer lists them); a partition still owned by another
member is withheld (UNRELEASED_PARTITIONS) until that member released it; so no partition is ever
owned by two members.

Pure data and functions: ``consumer_membership.py`` drives them and writes the records.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from .consumer_records import (
    Assignment,
    AssignmentEpochs,
    ClassicMemberMetadata,
    CurrentAssignmentValue,
    MemberMetadataValue,
    TopicMetadata,
)

LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2  # a static member leaving that will be back (its assignment is kept)
NO_OWNER = -1


class MemberState(enum.IntEnum):
    """Kafka's MemberState codes, as stored in ConsumerGroupCurrentMemberAssignment."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # KIP-1251: the member epoch at which each held partition was assigned to it (an offset
    # commit with an older epoch is accepted for a partition held since that epoch or before).
    assignment_epochs: AssignmentEpochs = field(default_factory=dict)
    # A member speaking the classic protocol (online migration): its JoinGroup's session timeout
    # and protocols. None for members heartbeating with ConsumerGroupHeartbeat.
    classic: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def holds_since(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """The epoch from which the member holds the partition (assigned or pending revocation),
        or None if it does not hold it. A partition of a record without epochs: its member epoch."""
        if partition in self.assigned.get(topic_id, ()) or partition in self.pending_revocation.get(topic_id, ()):
            return self.assignment_epochs.get((topic_id, partition), self.member_epoch)
        return None

    def metadata_value(self) -> MemberMetadataValue:
        """This member as a ConsumerGroupMemberMetadata record holds it."""
        return MemberMetadataValue(self.instance_id, self.rack_id, self.client_id, self.client_host,
                                   self.subscribed_topic_names, self.subscribed_topic_regex,
                                   self.rebalance_timeout_ms, self.server_assignor, self.classic)

    def assignment_value(self) -> CurrentAssignmentValue:
        """This member as a ConsumerGroupCurrentMemberAssignment record holds it."""
        return CurrentAssignmentValue(self.member_epoch, self.previous_member_epoch, int(self.state), self.assigned,
                                      self.pending_revocation, self.assignment_epochs)

    def same_subscription(self, other: ConsumerMember) -> bool:
        return (self.subscribed_topic_names == other.subscribed_topic_names
                and self.subscribed_topic_regex == other.subscribed_topic_regex)

    def same_metadata(self, other: ConsumerMember) -> bool:
        """Everything a ConsumerGroupMemberMetadata record holds is equal."""
        return (self.same_subscription(other) and self.instance_id == other.instance_id
                and self.rack_id == other.rack_id and self.client_id == other.client_id
                and self.client_host == other.client_host and self.server_assignor == other.server_assignor
                and self.rebalance_timeout_ms == other.rebalance_timeout_ms and self.classic == other.classic)

    def same_assignment_state(self, other: ConsumerMember) -> bool:
        """Everything a ConsumerGroupCurrentMemberAssignment record holds is equal."""
        return (self.member_epoch == other.member_epoch and self.previous_member_epoch == other.previous_member_epoch
                and self.state == other.state and self.assigned == other.assigned
                and self.pending_revocation == other.pending_revocation
                and self.assignment_epochs == other.assignment_epochs)


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> target partitions
    # Who owns each partition now (assigned or pending revocation): member id and its epoch.
    owners: dict[tuple[uuid.UUID, int], tuple[str, int]] = field(default_factory=dict)
    # The subscribed topics' metadata as of the last group epoch bump (by topic name).
    subscription_metadata: dict[str, TopicMetadata] = field(default_factory=dict)
    # KIP-1101's hash of ``subscription_metadata``, written with each epoch; the comparison that
    # bumps the epoch is of the metadata itself, kept in its own record (Kafka 4.0's way).
    metadata_hash: int = 0
    dead: bool = False

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE
               for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        owner = self.owners.get((topic_id, partition))
        return NO_OWNER if owner is None else owner[1]

    def set_member(self, member: ConsumerMember) -> None:
        """Put a member's metadata (a MemberMetadata record); its assignment is kept."""
        old = self.members.get(member.member_id)
        if old is not None:
            member = replace(member, member_epoch=old.member_epoch, previous_member_epoch=old.previous_member_epoch,
                             state=old.state, assigned=old.assigned, pending_revocation=old.pending_revocation,
                             assignment_epochs=old.assignment_epochs)
            if old.instance_id is not None and old.instance_id != member.instance_id:
                self.static_members.pop(old.instance_id, None)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def set_assignment_state(self, member_id: str, epoch: int, previous_epoch: int, state: MemberState,
                             assigned: Assignment, pending: Assignment,
                             assignment_epochs: AssignmentEpochs | None = None) -> None:
        """Put a member's current assignment (a CurrentMemberAssignment record), moving the
        partition ownership it implies."""
        old = self.members.get(member_id) or ConsumerMember(member_id)
        self._release(old)
        held = {(t, p) for part in (assigned, pending) for t, ps in part.items() for p in ps}
        epochs = {tp: e for tp, e in (assignment_epochs or {}).items() if tp in held}
        new = replace(old, member_epoch=epoch, previous_member_epoch=previous_epoch, state=state,
                      assigned=assigned, pending_revocation=pending, assignment_epochs=epochs)
        self.members[member_id] = new
        self._own(new)

    def remove_member(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self._release(member)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]

    def _release(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, parts in assignment.items():
                for p in parts:
                    owner = self.owners.get((topic_id, p))
                    if owner is not None and owner[0] == member.member_id:
                        del self.owners[(topic_id, p)]

    def _own(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, parts in assignment.items():
                for p in parts:
                    # Reconciliation never hands out an owned partition; a log that says otherwise
                    # (it cannot, written by us or Kafka) would still load, the newer owner winning.
                    self.owners[(topic_id, p)] = (member.member_id, member.member_epoch)

    # Classic members (online migration) ---------------------------------------------------

    def all_classic_except(self, member_ids: Iterable[str]) -> bool:
        """Would every member left after removing ``member_ids`` speak the classic protocol?"""
        leaving = set(member_ids)
        return all(m.uses_classic_protocol for m in self.members.values() if m.member_id not in leaving)

    def supports_classic_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """May a classic member with these protocols join? Its protocol type must be ``consumer``
        and one of its protocols supported by every classic member already in (Kafka's
        ConsumerGroup.supportsClassicProtocols)."""
        names = set(names)
        if protocol_type != "consumer":
            return False
        if not self.members:
            return bool(names)
        classic = [m.classic for m in self.members.values() if m.classic is not None]
        return any(all(name in {n for n, _ in c.protocols} for c in classic) for name in names)

    def waiting_on_unreleased_partition(self, member: ConsumerMember) -> bool:
        """Does the member wait for a target partition another member still owns?"""
        if member.state != MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, parts in self.target.get(member.member_id, {}).items():
            held = member.assigned.get(topic_id, frozenset())
            if any(p not in held and self.partition_epoch(topic_id, p) != NO_OWNER for p in parts):
                return True
        return False

    def subscribed_topic_names(self, resolve_regex: Callable[[str], Iterable[str]]) -> set[str]:
        names: set[str] = set()
        for member in self.members.values():
            names.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex is not None:
                names.update(resolve_regex(member.subscribed_topic_regex))
        return names


def _owned_contains_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Does the member still report one of ``partitions``? (Not reported at all: assume so.)"""
    if owned is None:
        return True
    return any(parts & partitions.get(topic_id, frozenset()) for topic_id, parts in owned.items())


def reconcile(member: ConsumerMember, target_epoch: int, target: Assignment,
              partition_epoch: Callable[[uuid.UUID, int], int], owned: Assignment | None) -> ConsumerMember:
    """One reconciliation step of ``member`` towards ``target`` at ``target_epoch``; ``owned`` is
    what the member's heartbeat says it owns (None: not sent)."""
    if member.state == MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if _owned_contains_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if member.state == MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _with_epoch(member: ConsumerMember, epoch: int, state: MemberState, assigned: Assignment,
                pending: Assignment) -> ConsumerMember:
    previous = member.previous_member_epoch if epoch == member.member_epoch else member.member_epoch
    # A partition the member already held keeps the epoch it was assigned at; one it gets now is
    # assigned at the member's new epoch (KIP-1251).
    epochs: AssignmentEpochs = {}
    for held in (assigned, pending):
        for topic_id, parts in held.items():
            for p in parts:
                since = member.holds_since(topic_id, p)
                epochs[(topic_id, p)] = epoch if since is None else since
    return replace(member, member_epoch=epoch, previous_member_epoch=previous, state=state,
                   assigned=assigned, pending_revocation=pending, assignment_epochs=epochs)


def _next(member: ConsumerMember, epoch: int, target_epoch: int, target: Assignment,
          partition_epoch: Callable[[uuid.UUID, int], int], owned: Assignment | None) -> ConsumerMember:
    assigned: Assignment = {}
    revoking: Assignment = {}
    to_assign: Assignment = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset())
        current = member.assigned.get(topic_id, frozenset())
        keep = current & wanted
        gone = current - keep
        free = frozenset(p for p in wanted - keep if partition_epoch(topic_id, p) == NO_OWNER)
        unreleased = unreleased or len(free) < len(wanted - keep)
        if keep:
            assigned[topic_id] = keep
        if gone:
            revoking[topic_id] = gone
        if free:
            to_assign[topic_id] = free
    if revoking and _owned_contains_any(owned, revoking):
        # Revocations first: the member keeps its epoch until it confirms giving them up.
        return _with_epoch(member, epoch, MemberState.UNREVOKED_PARTITIONS, assigned, revoking)
    for topic_id, parts in to_assign.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | parts
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _with_epoch(member, target_epoch, state, assigned, {})
