"""The classic group membership protocol: JoinGroup, SyncGroup, Heartbeat and LeaveGroup.

The decisions (and their order) follow Kafka's group coordinator, so every error code comes out
where Kafka's does: a rebalance starts when a member joins, changes its metadata, leaves or
expires; the join phase ends when every known member has rejoined or the rebalance timeout
passes (dynamic members that did not rejoin are dropped); the first rebalance of an empty group
is delayed by ``group.initial.rebalance.delay.ms`` (extended while new members keep arriving);
the leader's SyncGroup assignment is persisted before anyone receives it; a static member
(``group.instance.id``) that comes back under a new member id takes over its old place without
a rebalance and fences the old id.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol.errors import ErrorCode
from .consumer_records import GROUP_METADATA, PARTITION_METADATA, TARGET_ASSIGNMENT_METADATA, ConsumerGroupKey
from .effects import Body
from .group import (
    EMPTY_ASSIGNMENT,
    ClassicGroup,
    GroupState,
    Member,
    Protocols,
    generate_member_id,
)
from .records import CoordinatorRecord
from .state import ShardState, log

UNKNOWN_MEMBER_ID = ""
MIN_VERSION_REQUIRING_KNOWN_MEMBER_ID = 4  # JoinGroup v4+: MEMBER_ID_REQUIRED on first join
MIN_VERSION_SKIPPING_ASSIGNMENT = 9  # JoinGroup v9+: a rejoining static leader may skip assigning

S = GroupState


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    version: int
    reason: str | None = None


@dataclass(frozen=True)
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


def join_error(member_id: str, error: ErrorCode) -> Body:
    return {"error_code": error, "member_id": member_id, "generation_id": -1, "protocol_type": None,
            "protocol_name": None, "leader": "", "skip_assignment": False, "members": []}


def sync_error(error: ErrorCode) -> Body:
    return {"error_code": error, "protocol_type": None, "protocol_name": None, "assignment": b""}


class Membership(ShardState):
    # Requests ----------------------------------------------------------------------------

    def join_group(self, token: int, req: JoinRequest) -> None:
        consumer_group = self.consumer_groups.get(req.group_id)
        if consumer_group is not None:
            if consumer_group.members:
                # Classic members of a consumer group are served by classic_members.py, which
                # routes them there before this; without it, Kafka's answer with migration disabled.
                self.reply(token, join_error(req.member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
                return
            # An empty consumer group gives way to a classic one; its offsets stay.
            self.write([CoordinatorRecord(ConsumerGroupKey(t, req.group_id), None)
                        for t in (TARGET_ASSIGNMENT_METADATA, PARTITION_METADATA, GROUP_METADATA)])
            del self.consumer_groups[req.group_id]
        group = self.groups.get(req.group_id)
        is_unknown = req.member_id == UNKNOWN_MEMBER_ID
        is_new_group = group is None
        if group is None:
            if not is_unknown:
                # A member id the coordinator never gave out (or a group that is gone).
                self.reply(token, join_error(req.member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return
            group = ClassicGroup(req.group_id, state_timestamp_ms=self.now_ms)
            self.groups[req.group_id] = group
        if not self._accept_joining_member(group, req.member_id):
            group.remove(req.member_id)
            self.reply(token, join_error(UNKNOWN_MEMBER_ID, ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif is_unknown:
            self._join_new_member(token, group, req)
        else:
            self._join_existing_member(token, group, req)
        if is_new_group and not self.wrote_anything():
            # Record the new (still empty) group so that it exists after a coordinator move.
            self.write([self.empty_group_record(group)])

    def sync_group(self, token: int, req: SyncRequest) -> None:
        group = self.groups.get(req.group_id)
        if group is None or group.is_empty:
            self.reply(token, sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        error = self._validate_sync(group, req)
        if error is not None:
            self.reply(token, sync_error(error))
        elif group.is_in(S.PREPARING_REBALANCE):
            self.reply(token, sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_in(S.COMPLETING_REBALANCE):
            member = group.members[req.member_id]
            self._supersede(member.sync_token, sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
            member.sync_token = token
            self._remove_pending_sync_member(group, req.member_id)
            if group.is_leader(req.member_id):
                self._store_leader_assignment(group, req)
        elif group.is_in(S.STABLE):
            self._remove_pending_sync_member(group, req.member_id)
            member = group.members[req.member_id]
            self.reply(token, {"error_code": ErrorCode.NONE, "protocol_type": group.protocol_type,
                               "protocol_name": group.protocol_name, "assignment": member.assignment})

    def heartbeat(self, token: int, group_id: str, member_id: str, instance_id: str | None,
                  generation_id: int) -> None:
        group = self.groups.get(group_id)
        error: ErrorCode
        if group is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        elif group.is_in(S.DEAD):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif (invalid := group.validate_member(member_id, instance_id)) is not None:
            error = ErrorCode[invalid]
        elif generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        elif group.is_in(S.EMPTY):
            error = ErrorCode.UNKNOWN_MEMBER_ID
        else:
            # A member heartbeating through a rebalance is alive; it learns to rejoin.
            self.schedule_heartbeat(group, group.members[member_id])
            error = ErrorCode.REBALANCE_IN_PROGRESS if group.is_in(S.PREPARING_REBALANCE) else ErrorCode.NONE
        self.reply(token, {"error_code": error})

    def leave_group(self, token: int, group_id: str, leaving: list[LeavingMember]) -> None:
        group = self.groups.get(group_id)
        if group is None:
            self.reply(token, {"error_code": ErrorCode.NONE, "members": [
                self._leave_result(m, ErrorCode.UNKNOWN_MEMBER_ID) for m in leaving]})
            return
        if group.is_in(S.DEAD):
            self.reply(token, {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "members": []})
            return
        results: list[Body] = []
        removed = False
        for m in leaving:
            error = ErrorCode.NONE
            if m.member_id == UNKNOWN_MEMBER_ID:
                # Administrative removal of a static member by its instance id.
                static_id = group.static_member_id(m.group_instance_id)
                if static_id is None:
                    error = ErrorCode.UNKNOWN_MEMBER_ID
                else:
                    self._remove_current_member(group, static_id, m.reason)
            elif group.is_pending_member(m.member_id):
                group.remove(m.member_id)
                self.timers.cancel(self.heartbeat_key(group_id, m.member_id))
                log.info("group %s: pending member %s left (reason: %s)", group_id, m.member_id, m.reason)
            elif (invalid := group.validate_member(m.member_id, m.group_instance_id)) is not None:
                error = ErrorCode[invalid]
            else:
                self._remove_current_member(group, m.member_id, m.reason)
            removed = removed or error == ErrorCode.NONE
            results.append(self._leave_result(m, error))
        if removed:
            if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, "members left the group")
            elif group.is_in(S.PREPARING_REBALANCE):
                self._maybe_complete_join_phase(group)
        self.reply_when_written(token, {"error_code": ErrorCode.NONE, "members": results},
                                lambda error: {"error_code": error, "members": []})

    @staticmethod
    def _leave_result(m: LeavingMember, error: ErrorCode) -> Body:
        return {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": error}

    # JoinGroup paths ---------------------------------------------------------------------

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.config.max_size
        if group.is_in(S.EMPTY, S.DEAD):
            return True
        if group.is_in(S.PREPARING_REBALANCE):
            # The members already waiting count (not the group size, which may exceed a lowered
            # limit): the last ones to rejoin are the ones turned away.
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.num_awaiting_join < max_size
        return member_id in group.members or len(group.members) < max_size

    def _join_new_member(self, token: int, group: ClassicGroup, req: JoinRequest) -> None:
        if group.is_in(S.DEAD):
            # Being unloaded or deleted: the client looks the coordinator up again.
            self.reply(token, join_error(UNKNOWN_MEMBER_ID, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):
            self.reply(token, join_error(UNKNOWN_MEMBER_ID, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_member_id = generate_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            existing = group.static_member_id(req.group_instance_id)
            if existing is not None:
                log.info("group %s: static member %s rejoins with a new member id %s replacing %s (%s)",
                         group.group_id, req.group_instance_id, new_member_id, existing, group.state.label)
                self._replace_static_member(token, group, req, existing, new_member_id)
            else:
                self._add_member_then_rebalance(token, group, req, new_member_id)
        elif req.version >= MIN_VERSION_REQUIRING_KNOWN_MEMBER_ID:
            # The member must come back with the id it is given; until then it is pending, and
            # it is forgotten if it does not return within its session timeout.
            group.pending_join_members.add(new_member_id)
            self.timers.schedule(self.heartbeat_key(group.group_id, new_member_id),
                                 self.now_ms + req.session_timeout_ms,
                                 lambda: self._expire_heartbeat(group.group_id, new_member_id))
            self.reply(token, join_error(new_member_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_then_rebalance(token, group, req, new_member_id)

    def _join_existing_member(self, token: int, group: ClassicGroup, req: JoinRequest) -> None:
        member_id = req.member_id
        if group.is_in(S.DEAD):
            self.reply(token, join_error(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):
            self.reply(token, join_error(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if group.is_pending_member(member_id):
            if req.group_instance_id is not None:
                # Kafka never puts a static member in the pending set; refuse rather than guess.
                self.reply(token, join_error(member_id, ErrorCode.UNKNOWN_SERVER_ERROR))
                return
            self._add_member_then_rebalance(token, group, req, member_id)
            return
        invalid = group.validate_member(member_id, req.group_instance_id)
        if invalid is not None:
            self.reply(token, join_error(member_id, ErrorCode[invalid]))
            return
        member = group.members[member_id]
        if group.is_in(S.PREPARING_REBALANCE):
            self._update_member_then_rebalance(token, group, member, req)
        elif group.is_in(S.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # Same metadata: it probably missed the JoinGroup answer; give it again.
                self.reply(token, self._join_response(group, member_id, with_members=group.is_leader(member_id)))
            else:
                self._update_member_then_rebalance(token, group, member, req)
        elif group.is_in(S.STABLE):
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # A leader rejoining asks for a new assignment (topic metadata may have changed).
                self._update_member_then_rebalance(token, group, member, req)
            else:
                self.reply(token, self._join_response(group, member_id, with_members=False))
        else:
            self.reply(token, join_error(member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    def _join_response(self, group: ClassicGroup, member_id: str, *, with_members: bool,
                       leader: str | None = None, skip_assignment: bool = False) -> Body:
        return {
            "error_code": ErrorCode.NONE,
            "generation_id": group.generation_id,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name,
            "leader": group.leader_id if leader is None else leader,
            "skip_assignment": skip_assignment,
            "member_id": member_id,
            "members": self._member_list(group) if with_members else [],
        }

    @staticmethod
    def _member_list(group: ClassicGroup) -> list[Body]:
        return [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata(group.protocol_name)} for m in group.members.values()]

    def _supersede(self, token: int | None, body: Body) -> None:
        # A member re-sent a request while an older one was still parked (a client retrying on
        # a new connection). Kafka drops the older one silently; answering it lets a still
        # waiting connection move on instead of hanging.
        self.reply(token, body)

    def _add_member_then_rebalance(self, token: int, group: ClassicGroup, req: JoinRequest, member_id: str) -> None:
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type, req.protocols,
                        is_new=True)
        if group.is_in(S.PREPARING_REBALANCE) and group.previous_state is S.EMPTY:
            group.new_member_added = True  # extends the delayed initial rebalance
        group.add(member, token)
        # A new member cannot heartbeat (it has no id yet) and its parked JoinGroup cannot tell
        # that the client went away: bound how long it may wait.
        self.schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(group, f"new member {member_id} joined")

    def _update_member_then_rebalance(self, token: int, group: ClassicGroup, member: Member,
                                      req: JoinRequest) -> None:
        self._supersede(group.take_join_token(member), join_error(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, token)
        self._maybe_prepare_rebalance_or_complete_join(group, f"member {member.member_id} rejoined")

    def _replace_static_member(self, token: int, group: ClassicGroup, req: JoinRequest, old_id: str,
                               new_id: str) -> None:
        instance_id = req.group_instance_id
        assert instance_id is not None
        current_leader = group.leader_id
        old, new = group.replace_static_member(instance_id, old_id, new_id)
        # Fence whatever the old incarnation still has parked.
        fenced = join_error(old_id, ErrorCode.FENCED_INSTANCE_ID)
        self.reply(old.join_token, fenced)
        self.reply(old.sync_token, sync_error(ErrorCode.FENCED_INSTANCE_ID))
        self.timers.cancel(self.heartbeat_key(group.group_id, old_id))
        self.schedule_heartbeat(group, new)
        old_protocols, old_rebalance, old_session = new.protocols, new.rebalance_timeout_ms, new.session_timeout_ms
        group.update_member(new, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, token)

        if group.is_in(S.STABLE):
            if group.protocol_name != group.select_protocol():
                self._maybe_prepare_rebalance_or_complete_join(
                    group, f"static member {instance_id} rejoined with a change of protocol")
                return
            # Nothing the assignment depends on changed: persist the new member id and give the
            # member its previous assignment, without disturbing the others.
            generation = group.generation_id

            def after(error: ErrorCode) -> None:
                if group.members.get(new_id) is not new or new.join_token != token:
                    return
                if error != ErrorCode.NONE:
                    log.warning("group %s: could not persist static member %s: %s; reverting to %s",
                                group.group_id, instance_id, error.name, old_id)
                    group.take_join_token(new)
                    group.update_member(new, old_protocols, old_rebalance, old_session, None)
                    group.replace_static_member(instance_id, new_id, old_id)
                    self.schedule_heartbeat(group, group.members[old_id])
                    body = join_error(UNKNOWN_MEMBER_ID, error)
                    body.update(generation_id=generation, protocol_type=group.protocol_type,
                                protocol_name=group.protocol_name, leader=current_leader or "")
                    self.reply(token, body)
                    return
                group.take_join_token(new)
                if req.version >= MIN_VERSION_SKIPPING_ASSIGNMENT:
                    is_leader = group.is_leader(new_id)
                    self.reply(token, self._join_response(group, new_id, with_members=is_leader,
                                                          skip_assignment=is_leader))
                else:
                    # The old leader id keeps a rejoining leader from computing an assignment
                    # that a Stable group would never hand out.
                    self.reply(token, self._join_response(group, new_id, with_members=False,
                                                          leader=current_leader or ""))

            self.write([self.group_metadata_record(group, group.group_assignment())], after)
        elif group.is_in(S.COMPLETING_REBALANCE):
            # The leader may already be assigning to the old member id: start over.
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance")
        else:
            self._maybe_complete_join_phase(group)

    # Rebalance machinery -----------------------------------------------------------------

    @staticmethod
    def _join_key(group_id: str) -> tuple[str, str]:
        return ("join", group_id)

    @staticmethod
    def _sync_key(group_id: str) -> tuple[str, str]:
        return ("sync", group_id)

    def schedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
        group_id, member_id = group.group_id, member.member_id
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.timers.schedule(self.heartbeat_key(group_id, member_id), self.now_ms + timeout,
                             lambda: self._expire_heartbeat(group_id, member_id))

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(S.COMPLETING_REBALANCE):
            # Members waiting in SyncGroup must rejoin.
            self._reset_and_propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.is_in(S.EMPTY)
        group_id = group.group_id
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self.timers.schedule(self._join_key(group_id), self.now_ms + delay,
                                 lambda: self._try_complete_initial_rebalance(group_id, delay, remaining))
        group.transition_to(S.PREPARING_REBALANCE, self.now_ms)
        log.info("group %s: preparing to rebalance, old generation %d (%s)", group_id, group.generation_id, reason)
        if not initial:
            self._maybe_complete_join_else_schedule(group)

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> None:
        if group.has_all_members_joined():
            self._complete_join(group)
        else:
            group_id = group.group_id
            self.timers.schedule(self._join_key(group_id), self.now_ms + group.rebalance_timeout_ms(),
                                 lambda: self._complete_join_by_id(group_id))

    def _try_complete_initial_rebalance(self, group_id: str, delay: int, remaining: int) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining != 0:
            # Members are still arriving: wait a little longer, within the rebalance timeout.
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self.timers.schedule(self._join_key(group_id), self.now_ms + new_delay,
                                 lambda: self._try_complete_initial_rebalance(group_id, new_delay, new_remaining))
        else:
            self._complete_join(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if (group.is_in(S.PREPARING_REBALANCE) and group.previous_state is not S.EMPTY
                and group.has_all_members_joined()):
            self._complete_join(group)

    def _complete_join_by_id(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        group_id = group.group_id
        self.timers.cancel(self._join_key(group_id))
        missing = [m.member_id for m in group.not_yet_rejoined() if not m.is_static]
        for member_id in missing:
            group.remove(member_id)
            self.timers.cancel(self.heartbeat_key(group_id, member_id))
        if missing:
            log.info("group %s: removed members that did not rejoin in time: %s", group_id, missing)
        if group.is_in(S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined (only silent static members are left): wait for their sessions.
            log.warning("group %s: no member rejoined; retrying the join phase later", group_id)
            self.timers.schedule(self._join_key(group_id), self.now_ms + group.rebalance_timeout_ms(),
                                 lambda: self._complete_join_by_id(group_id))
            return
        group.init_next_generation(self.now_ms)
        if group.is_in(S.EMPTY):
            log.info("group %s: generation %d is empty", group_id, group.generation_id)
            self.write([self.group_metadata_record(group, {})])
            return
        log.info("group %s: generation %d with %d members, protocol %s", group_id, group.generation_id,
                 len(group.members), group.protocol_name)
        members = self._member_list(group)
        for member in group.members.values():
            body = self._join_response(group, member.member_id, with_members=False)
            if group.is_leader(member.member_id):
                body["members"] = members
            self.reply(group.take_join_token(member), body)
            self.schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        self.timers.schedule(self._sync_key(group_id), self.now_ms + group.rebalance_timeout_ms(),
                             lambda: self._expire_pending_sync(group_id, generation))

    def _expire_pending_sync(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation:
            return
        if group.is_in(S.COMPLETING_REBALANCE, S.STABLE) and group.pending_sync_members:
            late = sorted(group.pending_sync_members)
            for member_id in late:
                group.remove(member_id)
                self.timers.cancel(self.heartbeat_key(group_id, member_id))
            self._prepare_rebalance(group, f"members {late} did not send SyncGroup in time")

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self.timers.cancel(self._sync_key(group.group_id))

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.is_in(S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync_members:
            self.timers.cancel(self._sync_key(group.group_id))

    def _validate_sync(self, group: ClassicGroup, req: SyncRequest) -> ErrorCode | None:
        if group.is_in(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        invalid = group.validate_member(req.member_id, req.group_instance_id)
        if invalid is not None:
            return ErrorCode[invalid]
        if req.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if _inconsistent(req.protocol_type, group.protocol_type) or _inconsistent(req.protocol_name,
                                                                                   group.protocol_name):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _store_leader_assignment(self, group: ClassicGroup, req: SyncRequest) -> None:
        assignment = dict(req.assignments)
        missing = [m for m in group.members if m not in assignment]
        for member_id in missing:
            assignment[member_id] = EMPTY_ASSIGNMENT
        if missing:
            log.warning("group %s: leader gave no assignment to %s in generation %d", group.group_id, missing,
                        group.generation_id)
        generation = group.generation_id

        def after(error: ErrorCode) -> None:
            # Another rebalance may have started while the write was in flight.
            if self.groups.get(group.group_id) is not group or not group.is_in(S.COMPLETING_REBALANCE) \
                    or group.generation_id != generation:
                return
            if error != ErrorCode.NONE:
                self._reset_and_propagate_assignment(group, error)
                self._maybe_prepare_rebalance_or_complete_join(group, f"storing the assignment failed: {error.name}")
                return
            for member in group.members.values():
                member.assignment = assignment.get(member.member_id, EMPTY_ASSIGNMENT)
            self._propagate_assignment(group, ErrorCode.NONE)
            group.transition_to(S.STABLE, self.now_ms)
            log.info("group %s: generation %d is stable", group.group_id, generation)

        self.write([self.group_metadata_record(group, assignment)], after)

    def _reset_and_propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = EMPTY_ASSIGNMENT
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            token = group.take_sync_token(member)
            if token is None:
                continue
            self.reply(token, {"error_code": error,
                               "protocol_type": group.protocol_type if ok else None,
                               "protocol_name": group.protocol_name if ok else None,
                               "assignment": member.assignment})
            # Its session restarts now: it could not heartbeat while waiting for this answer.
            self.schedule_heartbeat(group, member)

    # Members going away ------------------------------------------------------------------

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in(S.DEAD):
            return
        if group.is_pending_member(member_id):
            log.info("group %s: pending member %s never rejoined; forgetting it", group_id, member_id)
            group.remove(member_id)
            if group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("group %s: member %s session expired; removing it", group_id, member_id)
        self.reply(group.take_join_token(member), join_error(UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member_id)
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, f"member {member_id} expired")
        elif group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group)

    def _remove_current_member(self, group: ClassicGroup, member_id: str, reason: str | None) -> None:
        member = group.members[member_id]
        self.timers.cancel(self.heartbeat_key(group.group_id, member_id))
        log.info("group %s: member %s left (reason: %s)", group.group_id, member_id, reason or "not provided")
        # Its JoinGroup may still be parked (it left mid-rebalance): release it. (A parked
        # SyncGroup would never be answered by Kafka; answering beats leaving it hanging.)
        self.reply(group.take_join_token(member), join_error(UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID))
        self.reply(group.take_sync_token(member), sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member_id)

    # Loading and unloading ---------------------------------------------------------------

    def on_loaded_membership(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                self.schedule_heartbeat(group, member)
            if len(group.members) > self.config.max_size:
                self._prepare_rebalance(group, f"loaded group has {len(group.members)} members, more than "
                                               f"group.max.size {self.config.max_size}")

    def on_unloaded_membership(self) -> None:
        for group in self.groups.values():
            if group.is_in(S.DEAD):
                continue
            group.transition_to(S.DEAD, self.now_ms)
            if group.previous_state is S.PREPARING_REBALANCE:
                for member in group.members.values():
                    self.reply(group.take_join_token(member), join_error(member.member_id, ErrorCode.NOT_COORDINATOR))
            elif group.previous_state in (S.COMPLETING_REBALANCE, S.STABLE):
                for member in group.members.values():
                    self.reply(group.take_sync_token(member), sync_error(ErrorCode.NOT_COORDINATOR))
        self.timers.clear()


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
