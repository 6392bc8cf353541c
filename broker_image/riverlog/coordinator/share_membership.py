"""ShareGroupHeartbeat and ShareGroupDescribe: KIP-932 share group membership on one
``__consumer_offsets`` partition.

A heartbeat, as Kafka's GroupMetadataManager handles one for a share group: (1) the member is
created or updated, and the group epoch bumped when membership, a subscription or the subscribed
topics' metadata changed; (2) the target assignment is recomputed by the simple assignor when the
group epoch is ahead of it; (3) the member takes its target and the assignment epoch at once --
a share group revokes nothing, since several members may share a partition. Members leave with
epoch -1 or are fenced when ``group.share.session.timeout.ms`` passes without a heartbeat.

Every change is a record in Kafka's share group formats (``share_records.py``) applied through
``replay_share``, the function loading uses. A group id is a share group, a consumer group or a
classic group, never two of them: a share heartbeat for another kind of group is
GROUP_ID_NOT_FOUND, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..protocol.errors import ErrorCode
from .consumer_records import Assignment, TopicMetadata
from .effects import Body
from .metadata_hash import topics_hash
from .records import CoordinatorRecord
from .share_group import LEAVE_EPOCH, SIMPLE_ASSIGNOR, ShareGroup, ShareMember, simple_assign
from .share_records import (
    SHARE_CURRENT_MEMBER_ASSIGNMENT,
    SHARE_GROUP_METADATA,
    SHARE_MEMBER_METADATA,
    SHARE_STATE_PARTITION_METADATA,
    SHARE_TARGET_ASSIGNMENT_MEMBER,
    SHARE_TARGET_ASSIGNMENT_METADATA,
    ShareCurrentAssignmentValue,
    ShareGroupEpochValue,
    ShareGroupKey,
    ShareMemberKey,
    ShareMemberMetadataValue,
    ShareStateTopicsValue,
    ShareTargetEpochValue,
    ShareTargetMemberValue,
)
from .state import ShardState, log

GROUP_TYPE_SHARE = "share"
SHARE_PROTOCOL_TYPE = "share"
STABLE_MEMBER_STATE = 0  # the only state a share group member has (Kafka's MemberState.STABLE)


class ShareHeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def share_heartbeat_error(code: ErrorCode, message: str | None = None) -> Body:
    return {"error_code": code, "error_message": message, "member_id": None, "member_epoch": 0,
            "heartbeat_interval_ms": 0, "assignment": None}


class ShareMembership(ShardState):
    # ShareGroupHeartbeat -------------------------------------------------------------------

    def share_group_heartbeat(self, token: int, group_id: str, member_id: str, member_epoch: int,
                              rack_id: str | None, subscribed_topic_names: tuple[str, ...] | None,
                              client_id: str, client_host: str) -> None:
        try:
            if member_epoch == LEAVE_EPOCH:
                body = self._share_leave(group_id, member_id)
            else:
                body = self._share_heartbeat(group_id, member_id, member_epoch, rack_id, subscribed_topic_names,
                                             client_id, client_host)
        except ShareHeartbeatError as exc:
            self.reply(token, share_heartbeat_error(exc.code, exc.message))
            return
        self.reply_when_written(token, body, lambda error: share_heartbeat_error(error))

    def _share_heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                         subscribed_topic_names: tuple[str, ...] | None, client_id: str,
                         client_host: str) -> Body:
        joining = member_epoch == 0
        group = self._share_group_for_heartbeat(group_id, joining)
        member = group.members.get(member_id)
        is_new = member is None
        if member is None:
            if not joining:
                raise ShareHeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                          f"Member {member_id} is not a member of group {group_id}.")
            if len(group.members) >= self.config.share_max_size:
                raise ShareHeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED, "The share group has reached its "
                                          f"maximum capacity of {self.config.share_max_size} members.")
            member = ShareMember(member_id)
        elif not joining and member_epoch != member.member_epoch:
            relation = "greater" if member_epoch > member.member_epoch else "smaller"
            raise ShareHeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                      f"The share group member has a {relation} member epoch ({member_epoch}) than "
                                      f"the one known by the group coordinator ({member.member_epoch}). The member "
                                      "must abandon all its partitions and rejoin.")
        updated = replace(
            member,
            rack_id=rack_id if rack_id is not None else member.rack_id,
            subscribed_topic_names=subscribed_topic_names if subscribed_topic_names is not None
            else member.subscribed_topic_names,
            client_id=client_id, client_host=client_host,
        )
        records: list[CoordinatorRecord] = []
        if is_new or _metadata(updated) != _metadata(member):
            records.append(_member_metadata_record(group_id, updated))
        bump = is_new or updated.subscribed_topic_names != member.subscribed_topic_names
        others = [m for m in group.members.values() if m.member_id != member_id]
        group.subscribed_topics = self._share_subscribed_topics([*others, updated])
        # KIP-1101: the epoch record keeps a hash of the subscribed topics' metadata, so a change
        # made while the group was loading on another coordinator is noticed, and no change is
        # not taken for one.
        metadata_hash = topics_hash(group.subscribed_topics.values())
        if bump or metadata_hash != group.metadata_hash:
            bump = True
            records.append(CoordinatorRecord(ShareGroupKey(SHARE_GROUP_METADATA, group_id),
                                             ShareGroupEpochValue(group.group_epoch + 1, metadata_hash)))
        self._apply_share(records)
        if bump:
            log.info("share group %s: epoch %d", group_id, group.group_epoch)
        if group.group_epoch > group.assignment_epoch:
            self._compute_share_target(group)
        current = group.members[member_id]
        target = group.target.get(member_id, {})
        if current.member_epoch != group.assignment_epoch or current.assigned != target:
            self._apply_share([_current_assignment_record(group_id, replace(
                current, previous_member_epoch=current.member_epoch, member_epoch=group.assignment_epoch,
                assigned=target))])
        self._schedule_share_session(group_id, member_id)
        final = group.members[member_id]
        body: Body = {"error_code": ErrorCode.NONE, "error_message": None, "member_id": member_id,
                      "member_epoch": final.member_epoch,
                      "heartbeat_interval_ms": self.group_int(group_id, "share.heartbeat.interval.ms",
                                                              self.config.share_heartbeat_interval_ms),
                      "assignment": None}
        if joining or subscribed_topic_names is not None or final.assigned != member.assigned:
            body["assignment"] = {"topic_partitions": [{"topic_id": t, "partitions": sorted(p)}
                                                       for t, p in sorted(final.assigned.items())]}
        return body

    def _share_group_for_heartbeat(self, group_id: str, joining: bool) -> ShareGroup:
        group = self.share_groups.get(group_id)
        if group is not None:
            return group
        if group_id in self.consumer_groups or group_id in self.groups:
            raise ShareHeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if not joining:
            raise ShareHeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
        group = ShareGroup(group_id)
        self.share_groups[group_id] = group
        return group

    def _share_leave(self, group_id: str, member_id: str) -> Body:
        group = self.share_groups.get(group_id)
        if group is None:
            raise ShareHeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
        if member_id not in group.members:
            raise ShareHeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                      f"Member {member_id} is not a member of group {group_id}.")
        self._fence_share_member(group, member_id, "left the group")
        return {"error_code": ErrorCode.NONE, "error_message": None, "member_id": member_id,
                "member_epoch": LEAVE_EPOCH, "heartbeat_interval_ms": 0, "assignment": None}

    def _fence_share_member(self, group: ShareGroup, member_id: str, why: str) -> None:
        records = [CoordinatorRecord(ShareMemberKey(t, group.group_id, member_id), None)
                   for t in (SHARE_CURRENT_MEMBER_ASSIGNMENT, SHARE_TARGET_ASSIGNMENT_MEMBER, SHARE_MEMBER_METADATA)]
        self._apply_share(records)
        group.subscribed_topics = self._share_subscribed_topics(list(group.members.values()))
        self._apply_share([CoordinatorRecord(ShareGroupKey(SHARE_GROUP_METADATA, group.group_id),
                                             ShareGroupEpochValue(group.group_epoch + 1,
                                                                  topics_hash(group.subscribed_topics.values())))])
        self.timers.cancel(self._share_session_key(group.group_id, member_id))
        log.info("share group %s: member %s %s; epoch %d", group.group_id, member_id, why, group.group_epoch)

    # Target assignment -------------------------------------------------------------------

    def _share_subscribed_topics(self, members: Sequence[ShareMember]) -> dict[str, TopicMetadata]:
        names = {n for m in members for n in m.subscribed_topic_names}
        return {n: self.topics[n] for n in sorted(names) if n in self.topics}

    def _compute_share_target(self, group: ShareGroup) -> None:
        topics = {t.topic_id: t for t in group.subscribed_topics.values()}
        subscriptions = {m.member_id: frozenset(group.subscribed_topics[n].topic_id for n in m.subscribed_topic_names
                                                if n in group.subscribed_topics)
                         for m in group.members.values()}
        new_target = simple_assign(subscriptions, topics)
        records = [CoordinatorRecord(ShareMemberKey(SHARE_TARGET_ASSIGNMENT_MEMBER, group.group_id, member_id),
                                     ShareTargetMemberValue(partitions))
                   for member_id, partitions in sorted(new_target.items())
                   if member_id not in group.target or group.target[member_id] != partitions]
        records.append(CoordinatorRecord(ShareGroupKey(SHARE_TARGET_ASSIGNMENT_METADATA, group.group_id),
                                         ShareTargetEpochValue(group.group_epoch, self.now_ms)))
        state_topics = dict(group.state_topics)
        for t in topics.values():
            known = state_topics.get(t.topic_id)
            assigned = any(t.topic_id in parts for parts in new_target.values())
            if assigned and (known is None or known[1] < t.num_partitions):
                state_topics[t.topic_id] = (t.name, t.num_partitions)
        if state_topics != group.state_topics:
            records.append(CoordinatorRecord(ShareGroupKey(SHARE_STATE_PARTITION_METADATA, group.group_id),
                                             ShareStateTopicsValue(tuple(
                                                 (tid, name, tuple(range(count)))
                                                 for tid, (name, count) in sorted(state_topics.items())))))
        self._apply_share(records)

    # Timers ------------------------------------------------------------------------------

    @staticmethod
    def _share_session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
        return ("share-session", group_id, member_id)

    def _schedule_share_session(self, group_id: str, member_id: str) -> None:
        def expire() -> None:
            group = self.share_groups.get(group_id)
            if group is not None and member_id in group.members:
                self._fence_share_member(group, member_id, "session expired")

        self.timers.schedule(self._share_session_key(group_id, member_id),
                             self.now_ms + self.group_int(group_id, "share.session.timeout.ms",
                                                          self.config.share_session_timeout_ms), expire)

    # Records: one path for live changes and loading --------------------------------------

    def _apply_share(self, records: list[CoordinatorRecord]) -> None:
        for record in records:
            self.replay_share(record)
        if records:
            self.write(records)

    def replay_share(self, record: CoordinatorRecord) -> None:
        key, value = record.key, record.value
        assert isinstance(key, ShareGroupKey | ShareMemberKey)
        group = self.share_groups.get(key.group)
        if group is None:
            if value is None:
                return
            group = self.share_groups[key.group] = ShareGroup(key.group)
        if isinstance(key, ShareMemberKey):
            _replay_member(group, key, value)
        elif key.record_type == SHARE_GROUP_METADATA:
            if value is None:
                del self.share_groups[key.group]
            else:
                assert isinstance(value, ShareGroupEpochValue)
                group.group_epoch, group.metadata_hash = value.epoch, value.metadata_hash
        elif key.record_type == SHARE_TARGET_ASSIGNMENT_METADATA and value is not None:
            assert isinstance(value, ShareTargetEpochValue)
            group.assignment_epoch = value.assignment_epoch
        elif key.record_type == SHARE_STATE_PARTITION_METADATA:
            assert value is None or isinstance(value, ShareStateTopicsValue)
            group.state_topics = {} if value is None else {
                tid: (name, max(parts, default=-1) + 1) for tid, name, parts in value.initialized}

    def on_loaded_share_groups(self) -> None:
        """Loaded members get a fresh session (they could not heartbeat while nobody led)."""
        for group in self.share_groups.values():
            group.subscribed_topics = self._share_subscribed_topics(list(group.members.values()))
            for member_id in group.members:
                self._schedule_share_session(group.group_id, member_id)

    def share_group_tombstones(self, group_id: str) -> list[CoordinatorRecord]:
        """The records deleting an empty share group."""
        return [CoordinatorRecord(ShareGroupKey(t, group_id), None)
                for t in (SHARE_STATE_PARTITION_METADATA, SHARE_TARGET_ASSIGNMENT_METADATA, SHARE_GROUP_METADATA)]

    # ShareGroupDescribe ------------------------------------------------------------------

    def describe_share_groups(self, group_ids: Sequence[str], authorized_operations: int) -> list[Body]:
        out: list[Body] = []
        for group_id in group_ids:
            group = self.share_groups.get(group_id)
            if group is None:
                other = group_id in self.groups or group_id in self.consumer_groups
                message = f"Group {group_id} is not a share group." if other else f"Group {group_id} not found."
                out.append({"error_code": ErrorCode.GROUP_ID_NOT_FOUND, "error_message": message,
                            "group_id": group_id, "group_state": "", "group_epoch": 0, "assignment_epoch": 0,
                            "assignor_name": "", "members": []})
                continue
            out.append({
                "error_code": ErrorCode.NONE, "error_message": None, "group_id": group_id,
                "group_state": group.state.value, "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch, "assignor_name": SIMPLE_ASSIGNOR,
                "members": [{"member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                             "client_id": m.client_id, "client_host": m.client_host,
                             "subscribed_topic_names": list(m.subscribed_topic_names),
                             "assignment": {"topic_partitions": self._share_named(m.assigned)}}
                            for m in group.members.values()],
                "authorized_operations": authorized_operations,
            })
        return out

    def _share_named(self, assignment: Assignment) -> list[Body]:
        return [{"topic_id": t, "topic_name": self.topic_names_by_id.get(t, ""), "partitions": sorted(p)}
                for t, p in sorted(assignment.items())]


def _replay_member(group: ShareGroup, key: ShareMemberKey, value: object) -> None:
    if key.record_type == SHARE_MEMBER_METADATA:
        if value is None:
            group.members.pop(key.member_id, None)
            return
        assert isinstance(value, ShareMemberMetadataValue)
        old = group.members.get(key.member_id) or ShareMember(key.member_id)
        group.members[key.member_id] = replace(old, rack_id=value.rack_id, client_id=value.client_id,
                                               client_host=value.client_host,
                                               subscribed_topic_names=value.subscribed_topic_names)
    elif key.record_type == SHARE_TARGET_ASSIGNMENT_MEMBER:
        if value is None:
            group.target.pop(key.member_id, None)
        else:
            assert isinstance(value, ShareTargetMemberValue)
            group.target[key.member_id] = value.partitions
    elif key.record_type == SHARE_CURRENT_MEMBER_ASSIGNMENT:
        member = group.members.get(key.member_id)
        if member is None:
            # Kafka writes the member's metadata first; a current assignment alone makes the member.
            if value is None:
                return
            member = ShareMember(key.member_id)
        if value is None:
            group.members[key.member_id] = replace(member, member_epoch=0, previous_member_epoch=-1, assigned={})
            return
        assert isinstance(value, ShareCurrentAssignmentValue)
        group.members[key.member_id] = replace(member, member_epoch=value.member_epoch,
                                               previous_member_epoch=value.previous_member_epoch,
                                               assigned=value.assigned)


def _metadata(m: ShareMember) -> tuple[object, ...]:
    return (m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names)


def _member_metadata_record(group_id: str, m: ShareMember) -> CoordinatorRecord:
    return CoordinatorRecord(ShareMemberKey(SHARE_MEMBER_METADATA, group_id, m.member_id),
                             ShareMemberMetadataValue(m.rack_id, m.client_id, m.client_host,
                                                      m.subscribed_topic_names))


def _current_assignment_record(group_id: str, m: ShareMember) -> CoordinatorRecord:
    return CoordinatorRecord(ShareMemberKey(SHARE_CURRENT_MEMBER_ASSIGNMENT, group_id, m.member_id),
                             ShareCurrentAssignmentValue(m.member_epoch, m.previous_member_epoch,
                                                         STABLE_MEMBER_STATE, m.assigned))
