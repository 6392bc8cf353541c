"""A classic consumer group: members, generation, protocol and the state of its rebalance.

Pure data with the bookkeeping rules of Kafka's ``ClassicGroup``: who is awaiting a JoinGroup
or SyncGroup answer, which protocols every member supports, who leads. Members waiting for an
answer hold a *reply token* (an int): the coordinator shell maps tokens to the futures of
parked requests, so this module never touches asyncio.

State machine (Kafka's names, shown by DescribeGroups and ListGroups)::

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                  ▲        │                                   │ leader's SyncGroup
      └──last member─────┤        └──nobody left──▶ Empty             ▼ persisted
         leaves          └──────────── join / leave / expiry ────── Stable
    any ──unload / delete──▶ Dead
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .consumer_protocol import CONSUMER_PROTOCOL_TYPE, union_of_subscriptions

Protocols = tuple[tuple[str, bytes], ...]
EMPTY_ASSIGNMENT = b""


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @property
    def label(self) -> str:
        return self.value


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                                               GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = EMPTY_ASSIGNMENT
    join_token: int | None = None
    sync_token: int | None = None
    # A member added by its first JoinGroup; its session may expire even while it waits.
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_token is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_token is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Protocols) -> bool:
        # Kafka compares the protocol collections as sets of (name, metadata).
        return sorted(self.protocols) == sorted(protocols)

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return False
        # A member parked in a rebalance counts as alive: it cannot heartbeat meanwhile.
        return self.awaiting_join or self.awaiting_sync

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")


@dataclass
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    state_timestamp_ms: int | None = None
    previous_state: GroupState = GroupState.DEAD
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_join_members: set[str] = field(default_factory=set)  # got MEMBER_ID_REQUIRED
    pending_sync_members: set[str] = field(default_factory=set)
    supported_protocols: dict[str, int] = field(default_factory=dict)  # name -> members supporting it
    num_awaiting_join: int = 0
    subscribed_topics: set[str] | None = None  # None: unknown
    new_member_added: bool = False  # during the initial (delayed) rebalance

    # Queries -----------------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def is_subscribed_to(self, topic: str) -> bool:
        if self.subscribed_topics is not None:
            return topic in self.subscribed_topics
        return self.uses_consumer_protocol()

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """May a member with this protocol type and these protocols join?"""
        names = list(names)
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(name, 0) == len(self.members) for name in names)

    def validate_member(self, member_id: str, instance_id: str | None) -> str | None:
        """The error name for a request from ``member_id``/``instance_id``, None if valid."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return "UNKNOWN_MEMBER_ID"
            if existing != member_id:
                return "FENCED_INSTANCE_ID"
        if member_id not in self.members:
            return "UNKNOWN_MEMBER_ID"
        return None

    def group_assignment(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}

    # Changes -----------------------------------------------------------------------------

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise RuntimeError(f"group {self.group_id}: cannot go from {self.state.label} to {target.label}")
        self.previous_state = self.state
        self.state = target
        self.state_timestamp_ms = now_ms

    def add(self, member: Member, join_token: int | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(f"static member {member.group_instance_id} is already in the group")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member, +1)
        member.join_token = join_token
        if member.awaiting_join:
            self.num_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count_protocols(member, -1)
            if member.awaiting_join:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(self, member: Member, protocols: Protocols, rebalance_timeout_ms: int,
                      session_timeout_ms: int, join_token: int | None) -> None:
        self._count_protocols(member, -1)
        member.protocols = protocols
        self._count_protocols(member, +1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join_token is not None and not member.awaiting_join:
            self.num_awaiting_join += 1
        elif join_token is None and member.awaiting_join:
            self.num_awaiting_join -= 1
        member.join_token = join_token

    def take_join_token(self, member: Member) -> int | None:
        """Detach the member's parked JoinGroup (the caller answers it)."""
        token = member.join_token
        if token is not None:
            member.join_token = None
            self.num_awaiting_join -= 1
        return token

    def take_sync_token(self, member: Member) -> int | None:
        token = member.sync_token
        member.sync_token = None
        return token

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> tuple[Member, Member]:
        """A static member came back with a new member id: the new id takes over the old one's
        place (assignment, leadership). Returns (old, new); the caller fences the old one's
        parked requests, whose tokens are left on ``old``."""
        old = self.members.pop(old_member_id)
        if old.awaiting_join:
            self.num_awaiting_join -= 1
        new = Member(new_member_id, old.group_instance_id, old.client_id, old.client_host,
                     old.rebalance_timeout_ms, old.session_timeout_ms, old.protocol_type, old.protocols,
                     old.assignment)
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        self.pending_sync_members.discard(old_member_id)
        return old, new

    def maybe_elect_new_joined_leader(self) -> bool:
        """At the end of the join phase the leader must be a member that rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def select_protocol(self) -> str:
        """The protocol every member supports that most members list first among those."""
        if not self.members:
            raise RuntimeError("cannot select a protocol for an empty group")
        candidates = {name for name, count in self.supported_protocols.items() if count == len(self.members)}
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes.items(), key=lambda item: item[1])[0]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        try:
            metadatas = [m.metadata(self.protocol_name) for m in self.members.values()]
        except ValueError:
            return None
        return union_of_subscriptions(metadatas)

    def _count_protocols(self, member: Member, delta: int) -> None:
        for name in member.protocol_names():
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) + delta


def generate_member_id(client_id: str, group_instance_id: str | None) -> str:
    """Kafka's member ids: ``<group.instance.id or client.id>-<random uuid>``."""
    return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"


def protocols_from_request(entries: Sequence[dict[str, object]]) -> Protocols:
    return tuple((str(p["name"]), bytes(p["metadata"])) for p in entries)  # type: ignore[call-overload]
