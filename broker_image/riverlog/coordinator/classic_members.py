"""Online migration between the classic and the consumer group protocols (KIP-848's rules, as
Kafka 4.3's GroupMetadataManager applies them under ``group.consumer.migration.policy``).

- **Upgrade**: a ``group.protocol=consumer`` member joining a running classic group (one using
  the embedded consumer protocol, within ``group.consumer.max.size``) converts it into a consumer
  group (``group_migration.consumer_group_records``); parked JoinGroup and SyncGroup requests are
  answered REBALANCE_IN_PROGRESS, and the new member's heartbeat then goes on as in any consumer
  group. Refused (GROUP_ID_NOT_FOUND) when the policy allows no upgrade.
- **Classic members of a consumer group** keep speaking JoinGroup/SyncGroup/Heartbeat/LeaveGroup,
  answered from the consumer group's reconciliation: a JoinGroup updates the member and reconciles
  it like a heartbeat (its subscription's owned partitions count as what it owns, so an eager
  member that revoked everything has revoked), and answers the member epoch as the generation;
  SyncGroup hands out the member's assigned partitions in its subscription's version; Heartbeat
  says REBALANCE_IN_PROGRESS when the group epoch moved past the member, when it must revoke, or
  when partitions it waits for became free, and the member rejoins. A member that does not rejoin
  within its rebalance timeout after being told, or does not sync within it after joining, is
  fenced; its session is its JoinGroup's session timeout.
- **Downgrade**: when fencing members (leaving, expiring) leaves only classic members, and the
  policy allows downgrades and ``group.max.size`` holds them, the group becomes a classic group
  again (``group_migration.classic_group_from``) and starts a rebalance.

  The same when a classic static member takes the place of the last consumer-protocol member
  (the same ``group.instance.id`` restarted with the classic protocol): that member is fenced, the
  group goes back to classic, and the JoinGroup is the classic group's.

Kafka refuses classic members of a consumer group only when the policy is ``disabled``
(INCONSISTENT_GROUP_PROTOCOL).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace

from ..client.consumer_protocol import decode_subscription
from ..protocol.errors import ErrorCode
from ..protocol.primitives import DecodeError
from .consumer_group import ConsumerGroup, ConsumerMember, MemberState
from .consumer_membership import ConsumerMembership, HeartbeatError, _current_assignment_record
from .consumer_protocol import CONSUMER_PROTOCOL_TYPE
from .consumer_records import (
    MEMBER_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    Assignment,
    ClassicMemberMetadata,
    ConsumerMemberKey,
    TargetMemberValue,
)
from .effects import Body
from .group import ClassicGroup, GroupState
from .group_migration import (
    MigrationError,
    classic_group_from,
    consumer_group_records,
    consumer_group_tombstones,
    serialize_assignment,
    to_assignment,
)
from .membership import (
    MIN_VERSION_REQUIRING_KNOWN_MEMBER_ID,
    UNKNOWN_MEMBER_ID,
    JoinRequest,
    LeavingMember,
    Membership,
    SyncRequest,
    join_error,
    sync_error,
)
from .records import CoordinatorRecord
from .state import log


class ClassicMembersOfConsumerGroups(Membership, ConsumerMembership):
    # Classic requests: to a consumer group with members, answered here ------------------

    def _consumer_group_with_members(self, group_id: str) -> ConsumerGroup | None:
        group = self.consumer_groups.get(group_id)
        return group if group is not None and group.members else None

    def join_group(self, token: int, req: JoinRequest) -> None:
        group = self._consumer_group_with_members(req.group_id)
        if group is None:
            super().join_group(token, req)
            return
        replaced = self._replaced_by_classic_static_member(group, req)
        if replaced is not None:
            # Downgraded (or left empty, which gives way to a classic group): the classic way on.
            self.fence_members(group, [replaced], f"replaced by classic static member {req.group_instance_id}")
            super().join_group(token, req)
            return
        try:
            body = self._classic_join(group, req)
        except HeartbeatError as exc:
            log.info("consumer group %s: JoinGroup of classic member %s refused: %s", req.group_id,
                     req.member_id or "(new)", exc.message)
            self.reply(token, join_error(req.member_id, exc.code))
            return
        self.reply_when_written(token, body, lambda error: join_error(body["member_id"], error))

    def sync_group(self, token: int, req: SyncRequest) -> None:
        group = self._consumer_group_with_members(req.group_id)
        if group is None:
            super().sync_group(token, req)
            return
        try:
            member = self._classic_member(group, req.member_id, req.group_instance_id)
            self._check_generation(member, req.generation_id)
            protocol_name = _protocol_name(member)
            if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                    req.protocol_name is not None and req.protocol_name != protocol_name):
                raise HeartbeatError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                                     f"Member {member.member_id}'s protocol does not match the group's.")
            if group.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
                # A new rebalance started since it joined: it must join again to catch up.
                self._schedule_classic_join(group, member)
                raise HeartbeatError(ErrorCode.REBALANCE_IN_PROGRESS, "The member must rejoin.")
        except HeartbeatError as exc:
            self.reply(token, sync_error(exc.code))
            return
        assert member.classic is not None
        self.timers.cancel(self.classic_sync_key(group.group_id, member.member_id))
        self._schedule_session(group.group_id, member.member_id)
        self.reply(token, {"error_code": ErrorCode.NONE, "protocol_type": req.protocol_type,
                           "protocol_name": req.protocol_name,
                           "assignment": serialize_assignment(member.assigned, self.topic_names_by_id,
                                                              member.classic.protocols[0][1])})

    def heartbeat(self, token: int, group_id: str, member_id: str, instance_id: str | None,
                  generation_id: int) -> None:
        group = self._consumer_group_with_members(group_id)
        if group is None:
            super().heartbeat(token, group_id, member_id, instance_id, generation_id)
            return
        try:
            member = self._classic_member(group, member_id, instance_id)
            self._check_generation(member, generation_id)
        except HeartbeatError as exc:
            self.reply(token, {"error_code": exc.code})
            return
        self._schedule_session(group_id, member.member_id)
        error = ErrorCode.NONE
        # Rejoin when the group moved on, to finish revoking, or to collect partitions now free.
        if (member.member_epoch < group.group_epoch or member.state == MemberState.UNREVOKED_PARTITIONS
                or (member.state == MemberState.UNRELEASED_PARTITIONS
                    and not group.waiting_on_unreleased_partition(member))):
            error = ErrorCode.REBALANCE_IN_PROGRESS
            self._schedule_classic_join(group, member)
        self.reply(token, {"error_code": error})

    def leave_group(self, token: int, group_id: str, leaving: list[LeavingMember]) -> None:
        group = self._consumer_group_with_members(group_id)
        if group is None:
            super().leave_group(token, group_id, leaving)
            return
        results: list[Body] = []
        fenced: list[str] = []
        for m in leaving:
            try:
                if m.group_instance_id is None:
                    member = group.members.get(m.member_id)
                    if member is None:
                        raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, "unknown member")
                else:
                    # An instance id with no member id: an administrator removing a static member.
                    member = self._static_member(group, m.group_instance_id, m.member_id or None)
            except HeartbeatError as exc:
                results.append({"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                                "error_code": exc.code})
                continue
            log.info("consumer group %s: member %s left through LeaveGroup (reason: %s)", group_id,
                     member.member_id, m.reason or "not provided")
            if member.member_id not in fenced:
                fenced.append(member.member_id)
            results.append({"member_id": member.member_id, "group_instance_id": m.group_instance_id,
                            "error_code": ErrorCode.NONE})
        self.fence_members(group, fenced, "left the group")
        self.reply_when_written(token, {"error_code": ErrorCode.NONE, "members": results},
                                lambda error: {"error_code": error, "members": []})

    # JoinGroup of a classic member -------------------------------------------------------

    def _classic_join(self, group: ConsumerGroup, req: JoinRequest) -> Body:
        if not self.config.classic_members_may_join_consumer_groups:
            raise HeartbeatError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                                 f"Cannot join the consumer group {group.group_id} with the classic protocol "
                                 "because the group migration is disabled.")
        unknown = req.member_id == UNKNOWN_MEMBER_ID
        member_id = str(uuid.uuid4()) if unknown else req.member_id
        if member_id not in group.members and len(group.members) >= self.config.consumer_max_size:
            raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED, "The consumer group is full.")
        if not group.supports_classic_protocols(req.protocol_type, [name for name, _ in req.protocols]):
            raise HeartbeatError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                                 f"Member {member_id}'s protocols are not supported.")
        if unknown and req.version >= MIN_VERSION_REQUIRING_KNOWN_MEMBER_ID and req.group_instance_id is None:
            # Come back with this id (nothing is recorded until it does, as in Kafka).
            return join_error(member_id, ErrorCode.MEMBER_ID_REQUIRED)
        try:
            subscription = decode_subscription(req.protocols[0][1])
        except DecodeError as exc:
            raise HeartbeatError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Unreadable subscription: {exc}") from exc
        member, is_new = self._member_for_join(group, req, member_id, unknown)
        updated = replace(
            member,
            instance_id=req.group_instance_id if req.group_instance_id is not None else member.instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            subscribed_topic_names=tuple(subscription.topics), subscribed_topic_regex=None,
            client_id=req.client_id, client_host=req.client_host,
            classic=ClassicMemberMetadata(req.session_timeout_ms, req.protocols),
        )
        # What it owns is what its subscription says (an eager member revoked everything before
        # rejoining); a v0 subscription says nothing, which is owning nothing, as in Kafka.
        owned: Assignment = to_assignment(subscription.owned_partitions, self.topics)
        self.update_member_and_reconcile(group, member, updated, is_new, owned)
        final = group.members[member_id]
        self.timers.cancel(self.classic_join_key(group.group_id, member_id))
        self._schedule_session(group.group_id, member_id)
        self._schedule_classic_timer(self.classic_sync_key(group.group_id, member_id), group.group_id, member_id,
                                     req.rebalance_timeout_ms, "did not send SyncGroup within its rebalance timeout")
        log.info("consumer group %s: classic member %s joined at epoch %d (%s)", group.group_id, member_id,
                 final.member_epoch, final.state.name)
        return {"error_code": ErrorCode.NONE, "generation_id": final.member_epoch,
                "protocol_type": CONSUMER_PROTOCOL_TYPE, "protocol_name": _protocol_name(final),
                "leader": "", "skip_assignment": False, "member_id": member_id, "members": []}

    def _replaced_by_classic_static_member(self, group: ConsumerGroup, req: JoinRequest) -> str | None:
        """The consumer-protocol member a classic static member's first JoinGroup replaces, when it
        is the last one and the group may go back to classic (Kafka's
        validateOnlineDowngradeWithReplacedMember); else None."""
        if req.group_instance_id is None or req.member_id != UNKNOWN_MEMBER_ID:
            return None
        replaced = group.static_members.get(req.group_instance_id)
        if replaced is None or group.members[replaced].classic is not None:
            return None
        if (not group.all_classic_except([replaced]) or not self.config.downgrade_enabled
                or len(group.members) - 1 > self.config.max_size):
            return None
        return replaced

    def _member_for_join(self, group: ConsumerGroup, req: JoinRequest, member_id: str,
                         unknown: bool) -> tuple[ConsumerMember, bool]:
        instance_id = req.group_instance_id
        if instance_id is None:
            # An id the group does not know makes a new member (Kafka's getOrMaybeCreateMember).
            member = group.members.get(member_id)
            return (member, False) if member is not None else (ConsumerMember(member_id), True)
        existing_id = group.static_members.get(instance_id)
        if not unknown:
            return self._static_member(group, instance_id, member_id), False
        if existing_id is None:
            return ConsumerMember(member_id, instance_id), True
        # The instance is back under a new member id: it takes the old one's place and target.
        old = group.members[existing_id]
        new = replace(old, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        self._apply(self._removal_records(group.group_id, existing_id) + [
            CoordinatorRecord(ConsumerMemberKey(MEMBER_METADATA, group.group_id, member_id), new.metadata_value()),
            CoordinatorRecord(ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, group.group_id, member_id),
                              TargetMemberValue(group.target.get(existing_id, {}))),
            _current_assignment_record(group.group_id, new),
        ])
        self._cancel_member_timers(group.group_id, existing_id)
        log.info("consumer group %s: static member %s rejoins with the classic protocol as %s, replacing %s",
                 group.group_id, instance_id, member_id, existing_id)
        return group.members[member_id], False

    # Checks shared by the classic requests -----------------------------------------------

    @staticmethod
    def _static_member(group: ConsumerGroup, instance_id: str, member_id: str | None) -> ConsumerMember:
        existing_id = group.static_members.get(instance_id)
        if existing_id is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if member_id is not None and existing_id != member_id:
            raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID,
                                 f"Static member {member_id} with instance id {instance_id} was fenced.")
        return group.members[existing_id]

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        if instance_id is not None:
            member = self._static_member(group, instance_id, member_id)
        else:
            found = group.members.get(member_id)
            if found is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group {group.group_id}.")
            member = found
        if not member.uses_classic_protocol:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} does not use the classic protocol.")
        return member

    @staticmethod
    def _check_generation(member: ConsumerMember, generation_id: int) -> None:
        if generation_id != member.member_epoch:
            raise HeartbeatError(ErrorCode.ILLEGAL_GENERATION,
                                 f"The request generation id {generation_id} is not equal to the member epoch "
                                 f"{member.member_epoch} of member {member.member_id}.")

    # Timers of classic members -----------------------------------------------------------

    def _schedule_classic_join(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """Told to rejoin, the member has its rebalance timeout to do so (kept if already running)."""
        key = self.classic_join_key(group.group_id, member.member_id)
        if self.timers.deadline(key) is None:
            self._schedule_classic_timer(key, group.group_id, member.member_id, member.rebalance_timeout_ms,
                                         "did not rejoin within its rebalance timeout")

    def _schedule_classic_timer(self, key: tuple[str, str, str], group_id: str, member_id: str, timeout_ms: int,
                                why: str) -> None:
        def expire() -> None:
            group = self.consumer_groups.get(group_id)
            if group is not None and member_id in group.members:
                self._fence(group, member_id, why)

        self.timers.schedule(key, self.now_ms + max(timeout_ms, 0), expire)

    # The conversions ---------------------------------------------------------------------

    def upgrade_classic_group(self, classic: ClassicGroup) -> ConsumerGroup:
        group_id = classic.group_id
        refusal = None
        if not self.config.upgrade_enabled:
            refusal = "online upgrade is disabled"
        elif not classic.uses_consumer_protocol():
            refusal = "the group does not use the consumer embedded protocol"
        elif len(classic.members) > self.config.consumer_max_size:
            refusal = "the group size exceeds the consumer group maximum size"
        if refusal is not None:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND,
                                 f"Cannot upgrade classic group {group_id} to consumer group because {refusal}.")
        try:
            records = consumer_group_records(classic, self.topics, self.now_ms)
        except MigrationError as exc:
            log.warning("group %s: cannot upgrade, malformed embedded consumer protocol: %s", group_id, exc)
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND,
                                 f"Cannot upgrade the classic group {group_id} to consumer group because the "
                                 "embedded consumer protocol is malformed.") from exc
        # Whoever waits in the classic rebalance joins the consumer group's instead.
        for member in classic.members.values():
            self.reply(classic.take_join_token(member), join_error(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
            self.reply(classic.take_sync_token(member), sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
        for member_id in [*classic.members, *classic.pending_join_members]:
            self.timers.cancel(self.heartbeat_key(group_id, member_id))
        self.timers.cancel(self._join_key(group_id))
        self.timers.cancel(self._sync_key(group_id))
        classic.transition_to(GroupState.DEAD, self.now_ms)
        self.write([self.group_tombstone(group_id)])
        del self.groups[group_id]
        self._apply(records)
        group = self.consumer_groups[group_id]
        for member_id in group.members:
            self._schedule_session(group_id, member_id)
        log.info("group %s: classic group (generation %d, %d members) converted to a consumer group", group_id,
                 classic.generation_id, len(group.members))
        return group

    def maybe_downgrade(self, group: ConsumerGroup, leaving: Sequence[str], why: str) -> bool:
        remaining = len(group.members) - len(set(leaving) & set(group.members))
        if (remaining <= 0 or not group.all_classic_except(leaving) or not self.config.downgrade_enabled
                or remaining > self.config.max_size):
            return False
        classic = classic_group_from(group, set(leaving), self.topic_names_by_id, self.now_ms)
        group_id = group.group_id
        for member_id in group.members:
            self._cancel_member_timers(group_id, member_id)
        self.write([*consumer_group_tombstones(group), self.group_metadata_record(classic, classic.group_assignment())])
        del self.consumer_groups[group_id]
        self.groups[group_id] = classic
        for member in classic.members.values():
            self.schedule_heartbeat(classic, member)
        log.info("consumer group %s: member(s) %s %s; only classic members remain: converted to a classic group",
                 group_id, ", ".join(leaving), why)
        self._prepare_rebalance(classic, f"downgrade of group {group_id} from consumer to classic")
        return True


def _protocol_name(member: ConsumerMember) -> str:
    """The protocol a classic member of a consumer group is told: the first it offered."""
    assert member.classic is not None
    return member.classic.protocols[0][0]
