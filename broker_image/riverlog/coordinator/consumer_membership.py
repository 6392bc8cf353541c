"""ConsumerGroupHeartbeat and ConsumerGroupDescribe: the KIP-848 consumer group protocol on one
``__consumer_offsets`` partition.

A heartbeat, as Kafka's GroupMetadataManager handles it: (1) the member is created or updated,
and the group epoch bumped when membership, a subscription or the subscribed topics' metadata
changed; (2) the target assignment is recomputed by the server-side assignor when the group epoch
is ahead of it; (3) the member is reconciled one step towards its target (``consumer_group.py``).
Every change is a record in Kafka's consumer group formats, applied to the state through the same
``replay_consumer`` that loading uses, so a loaded group is the group that was running. Members
leave with epoch -1 (a static member with -2: its partitions wait for it), or are fenced when
their session (``group.consumer.session.timeout.ms``) or, while revoking, their rebalance timeout
runs out.

A consumer heartbeat for a group id held by an empty classic group takes it over (its offsets
stay). A running classic group and the fencing of members are where online migration comes in
(``upgrade_classic_group``, ``maybe_downgrade``): this class refuses the first and never
downgrades; ``classic_members.py`` overrides both with Kafka's rules.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..protocol.errors import ErrorCode
from .consumer_assignors import ASSIGNORS, MemberSpec
from .consumer_group import (
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    reconcile,
)
from .consumer_records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    Assignment,
    ConsumerGroupKey,
    ConsumerMemberKey,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberMetadataValue,
    PartitionMetadataValue,
    TargetEpochValue,
    TargetMemberValue,
    TopicMetadata,
)
from .effects import Body
from .group import ClassicGroup
from .metadata_hash import topics_hash
from .records import CoordinatorRecord
from .state import ShardState, log
from .topic_regex import matching_topics

CONSUMER_PROTOCOL_TYPE = "consumer"
GROUP_TYPE_CONSUMER = "consumer"
# KIP-1099: ConsumerGroupDescribe v1 tells consumer-protocol members from classic ones.
MEMBER_TYPE_CLASSIC = 0
MEMBER_TYPE_CONSUMER = 1


@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: tuple[str, ...] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: Assignment | None
    client_id: str
    client_host: str
    # Whether the member's principal may DESCRIBE a topic; None without an authorizer. A regex
    # subscription takes only such topics (Kafka: KAFKA-18813), so a client never learns of a
    # topic it could not describe through its assignment.
    may_describe: Callable[[str], bool] | None = None


class HeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def heartbeat_error(code: ErrorCode, message: str | None = None) -> Body:
    return {"error_code": code, "error_message": message, "member_id": None, "member_epoch": 0,
            "heartbeat_interval_ms": 0, "assignment": None}


def _fenced(message: str) -> HeartbeatError:
    return HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, message + " The member must abandon all its partitions "
                                                                   "and rejoin.")


class ConsumerMembership(ShardState):
    # Topic metadata (set by the shell from the metadata image) ---------------------------

    def set_topics(self, topics: Mapping[str, TopicMetadata]) -> None:
        """The cluster's topics as of the latest metadata image; groups notice changes to the
        topics they subscribe to at their next heartbeat."""
        self.topics = dict(topics)
        self.topic_names_by_id = {t.topic_id: name for name, t in topics.items()}

    # ConsumerGroupHeartbeat ----------------------------------------------------------------

    def consumer_group_heartbeat(self, token: int, req: HeartbeatRequest) -> None:
        try:
            body = self._heartbeat(req)
        except HeartbeatError as exc:
            self.reply(token, heartbeat_error(exc.code, exc.message))
            return
        self.reply_when_written(token, body, lambda error: heartbeat_error(error))

    def _heartbeat(self, req: HeartbeatRequest) -> Body:
        if req.member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
            return self._leave(req)
        joining = req.member_epoch == 0
        group = self._group_for_heartbeat(req.group_id, joining)
        member_id = req.member_id or str(uuid.uuid4())  # v0 clients let the coordinator choose
        if len(group.members) >= self.config.consumer_max_size and member_id not in group.members:
            raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum "
                                 f"capacity of {self.config.consumer_max_size} members.")
        member, is_new = self._member_for_heartbeat(group, req, member_id)
        regex = req.subscribed_topic_regex if req.subscribed_topic_regex is not None else member.subscribed_topic_regex
        self._note_visible_topics(group.group_id, member_id, regex, req.may_describe)
        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=req.subscribed_topic_names if req.subscribed_topic_names is not None
            else member.subscribed_topic_names,
            subscribed_topic_regex=req.subscribed_topic_regex if req.subscribed_topic_regex is not None
            else member.subscribed_topic_regex,
            client_id=req.client_id, client_host=req.client_host,
        )
        current = self.update_member_and_reconcile(group, member, updated, is_new, req.owned)
        self._schedule_session(group.group_id, member_id)
        self._schedule_revocation(group, group.members[member_id])
        final = group.members[member_id]
        full_request = joining or (req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None
                                   and req.owned is not None)
        body: Body = {"error_code": ErrorCode.NONE, "error_message": None, "member_id": member_id,
                      "member_epoch": final.member_epoch,
                      "heartbeat_interval_ms": self.group_int(group.group_id, "consumer.heartbeat.interval.ms",
                                                              self.config.consumer_heartbeat_interval_ms),
                      "assignment": None}
        if full_request or final.assigned != current.assigned:
            body["assignment"] = {"topic_partitions": [{"topic_id": t, "partitions": sorted(p)}
                                                       for t, p in sorted(final.assigned.items())]}
        return body

    def update_member_and_reconcile(self, group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember,
                                    is_new: bool, owned: Assignment | None) -> ConsumerMember:
        """Steps 1-3 of a heartbeat (and of a classic member's JoinGroup): record the member's new
        metadata, bump the group epoch if membership, a subscription or the subscribed topics
        changed, recompute the target if it is behind, and reconcile the member one step (``owned``:
        what the member says it owns, None if it did not say). Returns the member as it was before
        reconciling."""
        group_id, member_id = group.group_id, updated.member_id
        records: list[CoordinatorRecord] = []
        if is_new or not updated.same_metadata(member):
            records.append(_member_metadata_record(group_id, updated))
        bump = is_new or not updated.same_subscription(member)
        # The topics the group subscribes to, with this member's (new) subscription.
        others = [m for m in group.members.values() if m.member_id != member_id]
        metadata = self._subscription_metadata(group_id, [*others, updated])
        if metadata != group.subscription_metadata:
            records.append(_partition_metadata_record(group_id, metadata))
            bump = True
        self._apply(records)
        if bump:
            self._apply([CoordinatorRecord(ConsumerGroupKey(GROUP_METADATA, group_id),
                                           GroupEpochValue(group.group_epoch + 1, topics_hash(metadata.values())))])
            log.info("consumer group %s: epoch %d", group_id, group.group_epoch)
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group)
        current = group.members[member_id]
        target = group.target.get(member_id, {})
        reconciled = reconcile(current, group.assignment_epoch, target, group.partition_epoch, owned)
        if not reconciled.same_assignment_state(current):
            self._apply([_current_assignment_record(group_id, reconciled)])
        return current

    def _group_for_heartbeat(self, group_id: str, joining: bool) -> ConsumerGroup:
        group = self.consumer_groups.get(group_id)
        if group is not None:
            return group
        if group_id in self.share_groups:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        classic = self.groups.get(group_id)
        if classic is not None:
            if not joining:
                raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            if not classic.is_empty:
                # A running classic group: online migration makes it a consumer group, or refuses.
                return self.upgrade_classic_group(classic)
            # An empty classic group (or one only holding offsets) becomes a consumer group; its
            # offsets stay, as in Kafka.
            self.write([self.group_tombstone(group_id)])
            del self.groups[group_id]
            log.info("group %s: empty classic group replaced by a consumer group", group_id)
        elif not joining:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        group = ConsumerGroup(group_id)
        self.consumer_groups[group_id] = group
        return group

    def _member_for_heartbeat(self, group: ConsumerGroup, req: HeartbeatRequest,
                              member_id: str) -> tuple[ConsumerMember, bool]:
        if req.member_epoch == 0:
            if req.instance_id is not None:
                existing_id = group.static_members.get(req.instance_id)
                if existing_id is not None and existing_id != member_id:
                    return self._replace_static_consumer(group, req.instance_id, existing_id, member_id), False
            member = group.members.get(member_id)
            if member is None:
                return ConsumerMember(member_id), True
            # Rejoining with epoch 0 (after being fenced): the client owns nothing now.
            if member.assigned or member.pending_revocation or member.member_epoch != 0:
                self._apply([_current_assignment_record(group.group_id, replace(
                    member, member_epoch=0, previous_member_epoch=-1, state=MemberState.STABLE, assigned={},
                    pending_revocation={}, assignment_epochs={}))])
            return group.members[member_id], False
        member = group.members.get(member_id)
        if member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group.group_id}.")
        if req.instance_id is not None and group.static_members.get(req.instance_id) != member_id:
            raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID,
                                 f"Static member {member_id} with instance id {req.instance_id} was fenced.")
        if req.member_epoch > member.member_epoch:
            raise _fenced(f"The consumer group member has a greater member epoch ({req.member_epoch}) than the one "
                          f"known by the group coordinator ({member.member_epoch}).")
        if req.member_epoch < member.member_epoch and not (
                req.member_epoch == member.previous_member_epoch and req.owned is not None
                and all(parts <= member.assigned.get(t, frozenset()) for t, parts in req.owned.items())):
            # Only a member that missed the answer bumping its epoch (previous epoch, owning a
            # subset of its assignment) may come back with an older epoch.
            raise _fenced(f"The consumer group member has a smaller member epoch ({req.member_epoch}) than the one "
                          f"known by the group coordinator ({member.member_epoch}).")
        return member, False

    def _replace_static_consumer(self, group: ConsumerGroup, instance_id: str, old_id: str,
                               new_id: str) -> ConsumerMember:
        old = group.members[old_id]
        if old.member_epoch != LEAVE_STATIC_EPOCH:
            raise HeartbeatError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                 f"Static member {old_id} with instance id {instance_id} is not released yet.")
        # The new member id takes the old one's place, assignment and epoch: no rebalance.
        new = replace(old, member_id=new_id, member_epoch=old.previous_member_epoch)
        target = group.target.get(old_id, {})
        self._apply(self._removal_records(group.group_id, old_id) + [
            _member_metadata_record(group.group_id, new),
            CoordinatorRecord(ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, group.group_id, new_id),
                              TargetMemberValue(target)),
            _current_assignment_record(group.group_id, new),
        ])
        self._cancel_member_timers(group.group_id, old_id)
        log.info("consumer group %s: static member %s is back as %s", group.group_id, instance_id, new_id)
        return group.members[new_id]

    def _leave(self, req: HeartbeatRequest) -> Body:
        group = self.consumer_groups.get(req.group_id)
        if group is None:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.")
        member_id = req.member_id
        if req.instance_id is not None:
            static_id = group.static_members.get(req.instance_id)
            if static_id is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if static_id != member_id:
                raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID,
                                     f"Static member {member_id} with instance id {req.instance_id} was fenced.")
        member = group.members.get(member_id)
        if member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group.group_id}.")
        if req.member_epoch == LEAVE_STATIC_EPOCH:
            if req.instance_id is None:
                raise HeartbeatError(ErrorCode.INVALID_REQUEST, "InstanceId can't be null.")
            # It keeps its assignment (nobody else gets those partitions) until its session ends.
            # The epoch it had is kept as the previous one, to hand back when it returns.
            self._apply([_current_assignment_record(group.group_id, replace(
                member, member_epoch=LEAVE_STATIC_EPOCH, previous_member_epoch=member.member_epoch,
                pending_revocation={}))])
            self.timers.cancel(self._revocation_key(group.group_id, member_id))
            log.info("consumer group %s: static member %s left temporarily", group.group_id, req.instance_id)
        else:
            self._fence(group, member_id, "left the group")
        return {"error_code": ErrorCode.NONE, "error_message": None, "member_id": member_id,
                "member_epoch": req.member_epoch, "heartbeat_interval_ms": 0, "assignment": None}

    # Online migration: overridden by classic_members.py, which serves classic members -------

    def upgrade_classic_group(self, classic: ClassicGroup) -> ConsumerGroup:
        """A consumer-protocol member joins the running classic group ``classic``: convert it, or
        raise HeartbeatError."""
        raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {classic.group_id} is not a consumer group.")

    def maybe_downgrade(self, group: ConsumerGroup, leaving: Sequence[str], why: str) -> bool:
        """Members ``leaving`` are being fenced: if a classic group should continue without them,
        make it so (the consumer group and its timers gone) and return True."""
        return False

    def _fence(self, group: ConsumerGroup, member_id: str, why: str) -> None:
        self.fence_members(group, [member_id], why)

    def fence_members(self, group: ConsumerGroup, member_ids: Sequence[str], why: str) -> None:
        """Remove members and bump the group epoch (Kafka's consumerGroupFenceMembers), unless the
        remaining members are all classic and the group goes back to being a classic group."""
        if not member_ids:
            return
        if self.maybe_downgrade(group, member_ids, why):
            return
        self._apply([r for member_id in member_ids for r in self._removal_records(group.group_id, member_id)])
        metadata = self._subscription_metadata(group.group_id, list(group.members.values()))
        extra: list[CoordinatorRecord] = []
        if metadata != group.subscription_metadata:
            extra.append(_partition_metadata_record(group.group_id, metadata))
        extra.append(CoordinatorRecord(ConsumerGroupKey(GROUP_METADATA, group.group_id),
                                       GroupEpochValue(group.group_epoch + 1, topics_hash(metadata.values()))))
        self._apply(extra)
        for member_id in member_ids:
            self._cancel_member_timers(group.group_id, member_id)
        log.info("consumer group %s: member(s) %s %s; epoch %d", group.group_id, ", ".join(member_ids), why,
                 group.group_epoch)

    @staticmethod
    def _removal_records(group_id: str, member_id: str) -> list[CoordinatorRecord]:
        return [CoordinatorRecord(ConsumerMemberKey(t, group_id, member_id), None)
                for t in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA)]

    # Target assignment -------------------------------------------------------------------

    def _note_visible_topics(self, group_id: str, member_id: str, regex: str | None,
                             may_describe: Callable[[str], bool] | None) -> None:
        """Remember which topics matching the member's regex its principal may describe, as of
        this heartbeat (in memory: after a coordinator move a member's regex is unfiltered until
        its next heartbeat, a few seconds)."""
        key = (group_id, member_id)
        if regex is None or may_describe is None:
            self.regex_visible.pop(key, None)
        else:
            self.regex_visible[key] = frozenset(n for n in matching_topics(regex, self.topics) if may_describe(n))

    def _regex_topics(self, group_id: str, member: ConsumerMember, topics: Mapping[str, TopicMetadata]) -> set[str]:
        assert member.subscribed_topic_regex is not None
        names = set(matching_topics(member.subscribed_topic_regex, topics))
        visible = self.regex_visible.get((group_id, member.member_id))
        return names if visible is None else names & visible

    def _subscription_metadata(self, group_id: str, members: Sequence[ConsumerMember]) -> dict[str, TopicMetadata]:
        names: set[str] = set()
        for m in members:
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex is not None:
                names.update(self._regex_topics(group_id, m, self.topics))
        return {n: self.topics[n] for n in sorted(names) if n in self.topics}

    def _member_topic_ids(self, group: ConsumerGroup, member: ConsumerMember) -> frozenset[uuid.UUID]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex is not None:
            names.update(self._regex_topics(group.group_id, member, group.subscription_metadata))
        return frozenset(group.subscription_metadata[n].topic_id for n in names if n in group.subscription_metadata)

    def _assignor_name(self, group: ConsumerGroup) -> str:
        """The server assignor most members ask for; the first configured one if none asks."""
        asked = Counter(m.server_assignor for m in group.members.values() if m.server_assignor is not None)
        if asked:
            return sorted(asked.items(), key=lambda item: (-item[1], item[0]))[0][0]
        return self.config.consumer_assignors[0]

    def _compute_target(self, group: ConsumerGroup) -> None:
        specs = {m.member_id: MemberSpec(self._member_topic_ids(group, m), m.rack_id, group.target.get(m.member_id, {}))
                 for m in group.members.values()}
        topics = {t.topic_id: t for t in group.subscription_metadata.values()}
        new_target = ASSIGNORS[self._assignor_name(group)](specs, topics)
        records = [CoordinatorRecord(ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, group.group_id, member_id),
                                     TargetMemberValue(partitions))
                   for member_id, partitions in sorted(new_target.items())
                   if group.target.get(member_id, {}) != partitions or member_id not in group.target]
        records.append(CoordinatorRecord(ConsumerGroupKey(TARGET_ASSIGNMENT_METADATA, group.group_id),
                                         TargetEpochValue(group.group_epoch, self.now_ms)))
        self._apply(records)

    # Timers ------------------------------------------------------------------------------

    @staticmethod
    def _session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
        return ("consumer-session", group_id, member_id)

    @staticmethod
    def _revocation_key(group_id: str, member_id: str) -> tuple[str, str, str]:
        return ("consumer-revocation", group_id, member_id)

    @staticmethod
    def classic_join_key(group_id: str, member_id: str) -> tuple[str, str, str]:
        return ("consumer-classic-join", group_id, member_id)

    @staticmethod
    def classic_sync_key(group_id: str, member_id: str) -> tuple[str, str, str]:
        return ("consumer-classic-sync", group_id, member_id)

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        def expire() -> None:
            group = self.consumer_groups.get(group_id)
            if group is not None and member_id in group.members:
                self._fence(group, member_id, "session expired")

        group = self.consumer_groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        # A classic member's session is the one its JoinGroup asked for.
        if member is not None and member.classic is not None:
            timeout = member.classic.session_timeout_ms
        else:
            timeout = self.group_int(group_id, "consumer.session.timeout.ms", self.config.consumer_session_timeout_ms)
        self.timers.schedule(self._session_key(group_id, member_id), self.now_ms + timeout, expire)

    def _schedule_revocation(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """While a member is revoking, its rebalance timeout runs: past it, it is fenced."""
        key = self._revocation_key(group.group_id, member.member_id)
        # Classic members revoke by rejoining: their JoinGroup and SyncGroup timers bound that.
        if member.state != MemberState.UNREVOKED_PARTITIONS or member.uses_classic_protocol:
            self.timers.cancel(key)
            return
        if self.timers.deadline(key) is not None:
            return
        group_id, member_id, epoch = group.group_id, member.member_id, member.member_epoch

        def expire() -> None:
            g = self.consumer_groups.get(group_id)
            m = g.members.get(member_id) if g is not None else None
            if g is not None and m is not None and m.state == MemberState.UNREVOKED_PARTITIONS \
                    and m.member_epoch == epoch:
                self._fence(g, member_id, "did not revoke its partitions within its rebalance timeout")

        timeout = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else 300_000
        self.timers.schedule(key, self.now_ms + timeout, expire)

    def _cancel_member_timers(self, group_id: str, member_id: str) -> None:
        """A member is gone: its timers, and what it was allowed to see."""
        self.regex_visible.pop((group_id, member_id), None)
        for key in (self._session_key(group_id, member_id), self._revocation_key(group_id, member_id),
                    self.classic_join_key(group_id, member_id), self.classic_sync_key(group_id, member_id)):
            self.timers.cancel(key)

    # Records: one path for live changes and loading --------------------------------------

    def _apply(self, records: list[CoordinatorRecord]) -> None:
        for record in records:
            self.replay_consumer(record)
        self.write(records)

    def replay_consumer(self, record: CoordinatorRecord) -> None:
        key, value = record.key, record.value
        assert isinstance(key, ConsumerGroupKey | ConsumerMemberKey)
        group = self.consumer_groups.get(key.group)
        if group is None:
            if value is None:
                return
            group = self.consumer_groups[key.group] = ConsumerGroup(key.group)
            # Offsets read earlier in the log may have made a simple classic group to hold them
            # (as Kafka does): the consumer group takes its place, as it did when it was created.
            classic = self.groups.get(key.group)
            if classic is not None and classic.is_empty:
                del self.groups[key.group]
        if isinstance(key, ConsumerMemberKey):
            self._replay_member(group, key, value)
        elif key.record_type == GROUP_METADATA:
            if value is None:
                del self.consumer_groups[key.group]
            else:
                assert isinstance(value, GroupEpochValue)
                group.group_epoch, group.metadata_hash = value.epoch, value.metadata_hash
        elif key.record_type == PARTITION_METADATA:
            assert value is None or isinstance(value, PartitionMetadataValue)
            group.subscription_metadata = {} if value is None else {t.name: t for t in value.topics}
        elif key.record_type == TARGET_ASSIGNMENT_METADATA and value is not None:
            assert isinstance(value, TargetEpochValue)
            group.assignment_epoch = value.assignment_epoch

    @staticmethod
    def _replay_member(group: ConsumerGroup, key: ConsumerMemberKey, value: object) -> None:
        if key.record_type == MEMBER_METADATA:
            if value is None:
                group.remove_member(key.member_id)
                return
            assert isinstance(value, MemberMetadataValue)
            group.set_member(ConsumerMember(
                key.member_id, value.instance_id, value.rack_id, value.client_id, value.client_host,
                value.subscribed_topic_names, value.subscribed_topic_regex, value.rebalance_timeout_ms,
                value.server_assignor, classic=value.classic))
        elif key.record_type == TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                group.target.pop(key.member_id, None)
            else:
                assert isinstance(value, TargetMemberValue)
                group.target[key.member_id] = value.partitions
        elif key.record_type == CURRENT_MEMBER_ASSIGNMENT:
            if value is None:
                if key.member_id in group.members:
                    group.set_assignment_state(key.member_id, 0, -1, MemberState.STABLE, {}, {})
                return
            assert isinstance(value, CurrentAssignmentValue)
            state = MemberState(value.state) if value.state in MemberState._value2member_map_ else MemberState.UNKNOWN
            group.set_assignment_state(key.member_id, value.member_epoch, value.previous_member_epoch, state,
                                       value.assigned, value.pending_revocation, value.assignment_epochs)

    def on_loaded_consumer_groups(self) -> None:
        """Loaded members get a fresh session (they could not heartbeat while nobody led)."""
        for group in self.consumer_groups.values():
            for member in group.members.values():
                self._schedule_session(group.group_id, member.member_id)
                self._schedule_revocation(group, member)

    def on_unloaded_consumer_groups(self) -> None:
        for group in self.consumer_groups.values():
            group.dead = True

    # ConsumerGroupDescribe ---------------------------------------------------------------

    def describe_consumer_groups(self, group_ids: Sequence[str], authorized_operations: int) -> list[Body]:
        out: list[Body] = []
        for group_id in group_ids:
            group = self.consumer_groups.get(group_id)
            if group is None:
                message = (f"Group {group_id} is not a consumer group." if group_id in self.groups
                           else f"Group {group_id} not found.")
                out.append({"error_code": ErrorCode.GROUP_ID_NOT_FOUND, "error_message": message,
                            "group_id": group_id, "group_state": "", "group_epoch": 0, "assignment_epoch": 0,
                            "assignor_name": "", "members": []})
                continue
            out.append({
                "error_code": ErrorCode.NONE, "error_message": None, "group_id": group_id,
                "group_state": group.state.value, "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch, "assignor_name": self._assignor_name(group),
                "members": [self._describe_consumer_member(m, group.target.get(m.member_id, {}))
                            for m in group.members.values()],
                "authorized_operations": authorized_operations,
            })
        return out

    def _describe_consumer_member(self, member: ConsumerMember, target: Assignment) -> Body:
        return {"member_id": member.member_id, "instance_id": member.instance_id, "rack_id": member.rack_id,
                "member_epoch": member.member_epoch, "client_id": member.client_id,
                "client_host": member.client_host, "subscribed_topic_names": list(member.subscribed_topic_names),
                "subscribed_topic_regex": member.subscribed_topic_regex,
                "assignment": {"topic_partitions": self._named(member.assigned)},
                "target_assignment": {"topic_partitions": self._named(target)},
                "member_type": MEMBER_TYPE_CLASSIC if member.uses_classic_protocol else MEMBER_TYPE_CONSUMER}

    def _named(self, assignment: Assignment) -> list[Body]:
        return [{"topic_id": t, "topic_name": self.topic_names_by_id.get(t, ""), "partitions": sorted(p)}
                for t, p in sorted(assignment.items())]


def _member_metadata_record(group_id: str, m: ConsumerMember) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerMemberKey(MEMBER_METADATA, group_id, m.member_id), m.metadata_value())


def _partition_metadata_record(group_id: str, metadata: Mapping[str, TopicMetadata]) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupKey(PARTITION_METADATA, group_id),
                             PartitionMetadataValue(tuple(metadata.values())))


def _current_assignment_record(group_id: str, m: ConsumerMember) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerMemberKey(CURRENT_MEMBER_ASSIGNMENT, group_id, m.member_id), m.assignment_value())
