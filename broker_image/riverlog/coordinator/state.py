"""State shared by the parts of the group state machine of one ``__consumer_offsets`` partition.

:class:`ShardState` holds the groups, the committed offsets, the timers and the clock, and
collects what an operation decides into a :class:`Result`. The operations themselves live in
``membership.py`` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers) and
``offset_ops.py`` (offset commits, fetches, deletions, expiry); ``shard.py`` puts them together.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping

from ..group_config import effective_int
from ..protocol.errors import ErrorCode
from .config import GroupConfig
from .consumer_group import ConsumerGroup
from .consumer_records import (
    GROUP_METADATA,
    PARTITION_METADATA,
    TARGET_ASSIGNMENT_METADATA,
    ConsumerGroupKey,
    TopicMetadata,
)
from .effects import AfterWrite, Body, Result, Timers, TxnWrite
from .group import ClassicGroup, Member
from .offsets import OffsetStore
from .records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
)
from .share_group import ShareGroup
from .txn_offsets import PendingTxnOffsets

log = logging.getLogger("riverlog.coordinator")


class ShardState:
    def __init__(self, partition: int, config: GroupConfig) -> None:
        self.partition = partition
        self.config = config
        self.groups: dict[str, ClassicGroup] = {}
        # KIP-848 consumer groups; a group id is in at most one of the two maps.
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        # KIP-932 share groups; likewise a group id of their own.
        self.share_groups: dict[str, ShareGroup] = {}
        # The cluster's topics (name -> metadata), from the shell's metadata image.
        self.topics: dict[str, TopicMetadata] = {}
        self.topic_names_by_id: dict[uuid.UUID, str] = {}
        # Group-level configs (group id -> overrides), from the shell's metadata image.
        self.group_configs: Mapping[str, Mapping[str, str]] = {}
        # (group id, member id) -> the topics matching the member's regex its principal may
        # DESCRIBE, from its latest heartbeat (consumer_membership.py); absent: not filtered.
        self.regex_visible: dict[tuple[str, str], frozenset[str]] = {}
        self.offsets = OffsetStore()
        self.pending_txn_offsets = PendingTxnOffsets()
        # Counts offset records applied, in log order (see OffsetAndMetadata.record_position).
        self.record_position = 0
        self.timers = Timers()
        self.now_ms = 0
        self._out = Result()

    # Running operations ------------------------------------------------------------------

    def _run(self, now_ms: int, action: Callable[[], None]) -> Result:
        """Run one operation at ``now_ms`` and return everything it decided."""
        self.now_ms = max(self.now_ms, now_ms)
        out, self._out = self._out, Result()
        try:
            action()
            return self._out
        finally:
            self._out = out

    def tick(self, now_ms: int) -> Result:
        """Fire every timer due at ``now_ms`` (timers may schedule further ones)."""

        def fire() -> None:
            while (entry := self.timers.pop_expired(self.now_ms)) is not None:
                entry[1]()

        return self._run(now_ms, fire)

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def complete_write(self, callbacks: list[AfterWrite], error: ErrorCode, now_ms: int) -> Result:
        """The records of an earlier Result are durable (NONE) or could not be written."""

        def run() -> None:
            for callback in callbacks:
                callback(error)

        return self._run(now_ms, run)

    # Helpers for the operations ----------------------------------------------------------

    def set_group_configs(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        """The group-level configs of the latest metadata image; a group's new values apply from
        its members' next heartbeats (the interval they are told, the session timer restarted)."""
        self.group_configs = configs

    def group_int(self, group_id: str, name: str, default: int) -> int:
        """Int group config ``name`` of ``group_id``: its override, else ``default`` (the broker's)."""
        return effective_int(self.group_configs.get(group_id), name, default, self.config.group_limits)

    def reply(self, token: int | None, body: Body) -> None:
        self._out.reply(token, body)

    def write(self, records: list[CoordinatorRecord], after: AfterWrite | None = None) -> None:
        self._out.write(records, after)

    def write_transactional(self, producer_id: int, producer_epoch: int, records: list[CoordinatorRecord],
                            after: AfterWrite) -> None:
        """Append ``records`` as a transactional batch of the producer (its pending offsets)."""
        self._out.write_transactional(TxnWrite(producer_id, producer_epoch, records, after))

    def wrote_anything(self) -> bool:
        return bool(self._out.records)

    def reply_when_written(self, token: int, body: Body, on_error: Callable[[ErrorCode], Body]) -> None:
        """Answer once this operation's records are durable; at once if it wrote none."""
        if not self._out.records:
            self.reply(token, body)
            return

        def after(error: ErrorCode) -> None:
            self.reply(token, body if error == ErrorCode.NONE else on_error(error))

        self._out.after_write.append(after)

    # Records -----------------------------------------------------------------------------

    def group_metadata_record(self, group: ClassicGroup, assignment: dict[str, bytes]) -> CoordinatorRecord:
        members = tuple(
            MemberMetadata(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.session_timeout_ms, m.metadata(group.protocol_name), assignment.get(m.member_id, b""),
            )
            for m in group.members.values()
        )
        value = GroupMetadataValue(
            group.protocol_type or "", group.generation_id, group.protocol_name, group.leader_id,
            group.state_timestamp_ms if group.state_timestamp_ms is not None else -1, members,
        )
        return CoordinatorRecord(GroupMetadataKey(group.group_id), value)

    def empty_group_record(self, group: ClassicGroup) -> CoordinatorRecord:
        value = GroupMetadataValue("", 0, None, None,
                                   group.state_timestamp_ms if group.state_timestamp_ms is not None else -1, ())
        return CoordinatorRecord(GroupMetadataKey(group.group_id), value)

    @staticmethod
    def group_tombstone(group_id: str) -> CoordinatorRecord:
        return CoordinatorRecord(GroupMetadataKey(group_id), None)

    @staticmethod
    def offset_tombstone(group_id: str, topic: str, partition: int) -> CoordinatorRecord:
        return CoordinatorRecord(OffsetCommitKey(group_id, topic, partition), None)

    @staticmethod
    def consumer_group_tombstones(group_id: str) -> list[CoordinatorRecord]:
        """The records that end an empty KIP-848 consumer group (its members' records are gone
        already): target assignment metadata, partition metadata, group epoch, as Kafka writes them."""
        return [CoordinatorRecord(ConsumerGroupKey(record_type, group_id), None)
                for record_type in (TARGET_ASSIGNMENT_METADATA, PARTITION_METADATA, GROUP_METADATA)]

    # Heartbeat timers (used by both membership and offset commits) -----------------------

    @staticmethod
    def heartbeat_key(group_id: str, member_id: str) -> tuple[str, str, str]:
        return ("heartbeat", group_id, member_id)

    def schedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
        raise NotImplementedError  # provided by the membership part

    def get_or_create_simple_group(self, group_id: str) -> ClassicGroup:
        """Offsets committed without group membership belong to a "simple" group: Empty, with
        no protocol type, created on the fly (not written: its offsets recreate it on load)."""
        group = self.groups.get(group_id)
        if group is None:
            group = ClassicGroup(group_id, state_timestamp_ms=self.now_ms)
            self.groups[group_id] = group
        return group
