"""The group state machine of one ``__consumer_offsets`` partition: all groups that hash to it.

Pure and single-threaded: the asyncio shell (``runtime.py``) calls it with a clock reading,
gets a :class:`~riverlog.coordinator.effects.Result` back, and does the I/O. Usage::

    result = shard.run(now_ms, shard.join_group, token, request)   # any operation
    result = shard.tick(now_ms)                                    # timers that are due
    result = shard.complete_write(result.after_write, ErrorCode.NONE, now_ms)

Loading replays the partition's records (``replay``, with the producer id of transactional
batches, and ``replay_marker`` for transaction markers), then ``on_loaded`` arms the timers;
``on_unloaded`` answers everything still parked with NOT_COORDINATOR.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..protocol.errors import ErrorCode
from .classic_members import ClassicMembersOfConsumerGroups
from .consumer_membership import GROUP_TYPE_CONSUMER
from .consumer_records import (
    ConsumerGroupKey,
    ConsumerMemberKey,
)
from .effects import Body, Result
from .group import ClassicGroup, GroupState, Member
from .offset_ops import OffsetOps
from .records import CoordinatorRecord, GroupMetadataKey, GroupMetadataValue, OffsetCommitKey
from .share_membership import GROUP_TYPE_SHARE, SHARE_PROTOCOL_TYPE, ShareMembership
from .share_records import ShareGroupKey, ShareMemberKey
from .state import log
from .txn_offsets import NO_PRODUCER_ID

S = GroupState
GROUP_TYPE_CLASSIC = "classic"
# Operations a describing client may perform on a group when no authorizer is configured:
# READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (Kafka's 32-bit field of AclOperation codes).
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)


class GroupShard(ClassicMembersOfConsumerGroups, ShareMembership, OffsetOps):
    def run(self, now_ms: int, operation: Callable[..., None], *args: Any) -> Result:
        """Run one operation (a bound method of this shard) at ``now_ms``."""
        return self._run(now_ms, lambda: operation(*args))

    # Loading -----------------------------------------------------------------------------

    def replay(self, record: CoordinatorRecord, producer_id: int = NO_PRODUCER_ID) -> None:
        """Apply one record read back from the log; ``producer_id`` is the producer of a
        transactional batch (its offsets stay pending until the marker)."""
        if isinstance(record.key, OffsetCommitKey):
            self.replay_offset(record, producer_id)
            return
        if isinstance(record.key, ConsumerGroupKey | ConsumerMemberKey):
            self.replay_consumer(record)
            return
        if isinstance(record.key, ShareGroupKey | ShareMemberKey):
            self.replay_share(record)
            return
        assert isinstance(record.key, GroupMetadataKey)
        group_id = record.key.group
        if record.value is None:
            self.groups.pop(group_id, None)
            return
        assert isinstance(record.value, GroupMetadataValue)
        self.groups[group_id] = _group_from_record(group_id, record.value)

    def replay_marker(self, producer_id: int, committed: bool) -> None:
        """Apply a transaction marker (control batch) read back from the log."""
        self.complete_transaction(producer_id, committed)

    def on_loaded(self, now_ms: int) -> Result:
        def loaded() -> None:
            for group in self.groups.values():
                group.subscribed_topics = group.compute_subscribed_topics()
            self.on_loaded_membership()
            self.on_loaded_consumer_groups()
            self.on_loaded_share_groups()
            self.schedule_expiration()
            if self.groups:
                log.info("offsets partition %d: %d groups, %d committed offsets, %d pending in %d transactions",
                         self.partition, len(self.groups), len(self.offsets), len(self.pending_txn_offsets),
                         len(self.pending_txn_offsets.producers()))

        return self._run(now_ms, loaded)

    def on_unloaded(self, now_ms: int) -> Result:
        def unloaded() -> None:
            self.on_unloaded_membership()
            self.on_unloaded_consumer_groups()

        return self._run(now_ms, unloaded)

    # Admin operations --------------------------------------------------------------------

    def describe_groups(self, group_ids: Sequence[str], version: int, include_operations: bool) -> list[Body]:
        out: list[Body] = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None:
                body: Body = {"error_code": ErrorCode.NONE, "group_id": group_id, "group_state": S.DEAD.label,
                              "protocol_type": "", "protocol_data": "", "members": [],
                              "authorized_operations": GROUP_AUTHORIZED_OPERATIONS if include_operations
                              else AUTHORIZED_OPERATIONS_OMITTED}
                if version >= 6:  # KIP-1043: say so instead of describing a Dead group
                    body.update(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} not found.",
                                authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
                out.append(body)
                continue
            stable = group.is_in(S.STABLE)
            out.append({
                "error_code": ErrorCode.NONE,
                "group_id": group_id,
                "group_state": group.state.label,
                "protocol_type": group.protocol_type or "",
                # The protocol and member metadata are only meaningful once the group is Stable.
                "protocol_data": (group.protocol_name or "") if stable else "",
                "members": [_describe_member(m, group.protocol_name if stable else None)
                            for m in group.members.values()],
                "authorized_operations": GROUP_AUTHORIZED_OPERATIONS if include_operations
                else AUTHORIZED_OPERATIONS_OMITTED,
            })
        return out

    def list_groups(self, states: Sequence[str], types: Sequence[str]) -> list[Body]:
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        out: list[Body] = []
        if not wanted_types or GROUP_TYPE_CLASSIC in wanted_types:
            out.extend({"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state.label,
                        "group_type": GROUP_TYPE_CLASSIC}
                       for g in self.groups.values()
                       if not wanted_states or g.state.label.lower() in wanted_states)
        if not wanted_types or GROUP_TYPE_CONSUMER in wanted_types:
            out.extend({"group_id": g.group_id, "protocol_type": "consumer", "group_state": g.state.value,
                        "group_type": GROUP_TYPE_CONSUMER}
                       for g in self.consumer_groups.values()
                       if not wanted_states or g.state.value.lower() in wanted_states)
        if not wanted_types or GROUP_TYPE_SHARE in wanted_types:
            out.extend({"group_id": g.group_id, "protocol_type": SHARE_PROTOCOL_TYPE, "group_state": g.state.value,
                        "group_type": GROUP_TYPE_SHARE}
                       for g in self.share_groups.values()
                       if not wanted_states or g.state.value.lower() in wanted_states)
        return out

    def delete_groups(self, token: int, group_ids: Sequence[str]) -> None:
        results: list[Body] = []
        records: list[CoordinatorRecord] = []
        for group_id in group_ids:
            share_group = self.share_groups.get(group_id)
            if share_group is not None:
                if share_group.members:
                    results.append({"group_id": group_id, "error_code": ErrorCode.NON_EMPTY_GROUP})
                    continue
                records.extend(self.share_group_tombstones(group_id))
                del self.share_groups[group_id]
                results.append({"group_id": group_id, "error_code": ErrorCode.NONE})
                log.info("share group %s: deleted", group_id)
                continue
            consumer_group = self.consumer_groups.get(group_id)
            if consumer_group is not None:
                if consumer_group.members:
                    results.append({"group_id": group_id, "error_code": ErrorCode.NON_EMPTY_GROUP})
                    continue
                records.extend(self.offset_tombstone(group_id, topic, partition)
                               for topic, partition, _ in self.offsets.entries(group_id))
                records.extend(self.consumer_group_tombstones(group_id))
                del self.consumer_groups[group_id]
                results.append({"group_id": group_id, "error_code": ErrorCode.NONE})
                log.info("consumer group %s: deleted", group_id)
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_in(S.DEAD):
                results.append({"group_id": group_id, "error_code": ErrorCode.GROUP_ID_NOT_FOUND})
                continue
            if group.is_in(S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE):
                results.append({"group_id": group_id, "error_code": ErrorCode.NON_EMPTY_GROUP})
                continue
            records.extend(self.offset_tombstone(group_id, topic, partition)
                           for topic, partition, _ in self.offsets.entries(group_id))
            # Pending transactional offsets go too; one tombstone per partition is enough.
            records.extend(self.offset_tombstone(group_id, topic, partition)
                           for topic, partition in self.pending_txn_offsets.partitions(group_id)
                           if self.offsets.get(group_id, topic, partition) is None)
            records.append(self.group_tombstone(group_id))
            del self.groups[group_id]
            group.transition_to(S.DEAD, self.now_ms)
            # Members that only got MEMBER_ID_REQUIRED have heartbeat timers; let them go.
            self.timers.cancel(self._join_key(group_id))
            results.append({"group_id": group_id, "error_code": ErrorCode.NONE})
            log.info("group %s: deleted", group_id)
        self._write_and_apply(records)
        self.reply_when_written(token, {"results": results}, lambda error: {"results": [
            {"group_id": r["group_id"], "error_code": error if r["error_code"] == ErrorCode.NONE else r["error_code"]}
            for r in results]})

    # Introspection (metrics, tools) ------------------------------------------------------

    def group_summaries(self) -> list[tuple[str, str, str, int, int | None, int]]:
        """(group id, type, state, member count, group epoch, members behind the target's epoch)
        of every group; the last two are None and 0 for classic groups."""
        out: list[tuple[str, str, str, int, int | None, int]] = [
            (g.group_id, GROUP_TYPE_CLASSIC, g.state.label, len(g.members), None, 0) for g in self.groups.values()]
        out += [(g.group_id, GROUP_TYPE_CONSUMER, g.state.value, len(g.members), g.group_epoch,
                 sum(1 for m in g.members.values() if m.member_epoch != g.assignment_epoch))
                for g in self.consumer_groups.values()]
        return out


def _describe_member(member: Member, protocol: str | None) -> Body:
    return {
        "member_id": member.member_id,
        "group_instance_id": member.group_instance_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "member_metadata": member.metadata(protocol) if protocol is not None else b"",
        "member_assignment": member.assignment,
    }


def _group_from_record(group_id: str, value: GroupMetadataValue) -> ClassicGroup:
    """A group as its last record left it: Stable with its members and assignments (so members
    that keep heartbeating after a coordinator move carry on), or Empty."""
    group = ClassicGroup(
        group_id,
        state=S.STABLE if value.members else S.EMPTY,
        generation_id=value.generation,
        protocol_type=value.protocol_type or None,
        protocol_name=value.protocol,
        leader_id=value.leader,
        state_timestamp_ms=value.current_state_timestamp if value.current_state_timestamp >= 0 else None,
    )
    for m in value.members:
        rebalance_timeout = m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout
        protocols = ((value.protocol or "", m.subscription),)
        group.add(Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, rebalance_timeout,
                         m.session_timeout, value.protocol_type, protocols, m.assignment))
    return group
