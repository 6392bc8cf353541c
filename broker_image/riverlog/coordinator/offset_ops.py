"""Offset commits, fetches and deletions, and the expiry of old offsets, as Kafka decides them.

Commits are checked against the group (generation, member, instance id); a commit with
generation -1 to an empty or unknown group is a "standalone" commit (``assign()`` without
joining) and creates a simple group. Offsets are applied when their record is durable.
Transactional commits (TxnOffsetCommit) are written in a transactional batch of the producer
and stay pending (``txn_offsets.py``) until the transaction's marker commits or aborts them;
OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for partitions that have
pending offsets, deletions drop pending offsets too, and expiry leaves them alone.
Expiry (every ``offsets.retention.check.interval.ms``) removes offsets older than
``offsets.retention.minutes`` — counted from when the group became Empty, or from the commit
for simple groups — and then the group itself once it is empty and has no offsets left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..protocol.errors import ErrorCode
from .consumer_group import ConsumerGroup
from .effects import Body
from .group import ClassicGroup, GroupState
from .offsets import OffsetAndMetadata
from .records import CoordinatorRecord, OffsetCommitKey, OffsetCommitValue
from .state import ShardState, log
from .topic_regex import matching_topics
from .txn_offsets import NO_PRODUCER_ID

S = GroupState
INVALID_OFFSET = -1
MIN_VERSION_GROUP_ID_NOT_FOUND = 9  # OffsetCommit v9+: unknown group -> GROUP_ID_NOT_FOUND
MIN_VERSION_MEMBER_EPOCH = 9  # OffsetCommit v9+ (KIP-848): member epochs of consumer groups


@dataclass(frozen=True)
class CommitPartition:
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True)
class CommitRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    retention_time_ms: int  # -1: the broker's retention
    topics: tuple[tuple[str, tuple[CommitPartition, ...]], ...]
    version: int


@dataclass(frozen=True)
class TxnCommitRequest:
    """A TxnOffsetCommit: offsets committed inside the producer's open transaction."""

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int  # v3+; -1 before
    member_id: str  # v3+; "" before
    group_instance_id: str | None
    topics: tuple[tuple[str, tuple[CommitPartition, ...]], ...]
    version: int


# (topic, [(partition, error)]) as answered to an OffsetCommit or OffsetDelete
PartitionErrors = list[tuple[str, list[tuple[int, ErrorCode]]]]


class OffsetOps(ShardState):
    # OffsetCommit ------------------------------------------------------------------------

    def commit_offsets(self, token: int, req: CommitRequest) -> None:
        def all_failed(error: ErrorCode) -> Body:
            return {"topics": [(topic, [(p.partition, error) for p in parts]) for topic, parts in req.topics]}

        if req.group_id in self.consumer_groups:
            consumer_error = self.validate_consumer_commit(
                req.group_id, req.member_id, req.generation_id, req.version,
                [(topic, p.partition) for topic, parts in req.topics for p in parts])
            if consumer_error is not None:
                self.reply(token, all_failed(consumer_error))
                return
        elif not self._accept_classic_commit(token, req, all_failed):
            return
        expire_at = -1 if req.retention_time_ms == -1 else self.now_ms + req.retention_time_ms
        results: PartitionErrors = []
        records: list[CoordinatorRecord] = []
        for topic, partitions in req.topics:
            topic_results: list[tuple[int, ErrorCode]] = []
            for p in partitions:
                metadata = p.metadata or ""
                if p.metadata is not None and len(metadata) > self.config.offset_metadata_max_bytes:
                    topic_results.append((p.partition, ErrorCode.OFFSET_METADATA_TOO_LARGE))
                    continue
                topic_results.append((p.partition, ErrorCode.NONE))
                value = OffsetCommitValue(p.offset, metadata, self.now_ms, p.leader_epoch, expire_at)
                records.append(CoordinatorRecord(OffsetCommitKey(req.group_id, topic, p.partition), value))
            results.append((topic, topic_results))
        if not records:
            self.reply(token, {"topics": results})
            return

        def after(error: ErrorCode) -> None:
            if error != ErrorCode.NONE:
                self.reply(token, all_failed(error))
                return
            for record in records:
                self.replay_offset(record)
            self.reply(token, {"topics": results})

        self.write(records, after)

    def _accept_classic_commit(self, token: int, req: CommitRequest, all_failed: Callable[[ErrorCode], Body]) -> bool:
        group = self.groups.get(req.group_id)
        if group is None:
            if req.generation_id < 0:
                log.info("group %s: created as a simple group by a standalone offset commit", req.group_id)
                group = self.get_or_create_simple_group(req.group_id)
            else:
                self.reply(token, all_failed(ErrorCode.GROUP_ID_NOT_FOUND
                                             if req.version >= MIN_VERSION_GROUP_ID_NOT_FOUND
                                             else ErrorCode.ILLEGAL_GENERATION))
                return False
        error = self._validate_commit(group, req.generation_id, req.member_id, req.group_instance_id,
                                      transactional=False)
        if error is not None:
            self.reply(token, all_failed(error))
            return False
        if group.is_in(S.STABLE, S.PREPARING_REBALANCE):
            # Committing keeps a classic member's session alive.
            self.schedule_heartbeat(group, group.members[req.member_id])
        return True

    # KIP-848 consumer groups (Kafka's ConsumerGroup.validateOffsetCommit / validateOffsetFetch).

    def validate_consumer_commit(self, group_id: str, member_id: str, member_epoch: int, version: int,
                                 partitions: Sequence[tuple[str, int]] = (), *, transactional: bool = False,
                                 instance_id: str | None = None) -> ErrorCode | None:
        group = self.consumer_groups[group_id]
        if member_epoch < 0 and not group.members:
            return None  # an admin client or a consumer without group management
        if transactional and member_epoch < 0 and not member_id and instance_id is None:
            return None  # TxnOffsetCommit before v3 names no member: Kafka accepts it
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        # A classic member of the group (online migration) commits with its generation, which is
        # its member epoch, and is told ILLEGAL_GENERATION where others are told STALE_MEMBER_EPOCH.
        stale = ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH
        if not transactional and not member.uses_classic_protocol and version < MIN_VERSION_MEMBER_EPOCH:
            return ErrorCode.UNSUPPORTED_VERSION  # consumer-protocol members commit with v9+
        if member_epoch == member.member_epoch:
            return None
        if member_epoch > member.member_epoch:
            return stale
        # KIP-1251 (Kafka 4.3): a member whose epoch moved on before it heard of it may still
        # commit, with its older epoch, the partitions it has held since that epoch or before.
        for topic, partition in partitions:
            metadata = self.topics.get(topic)
            since = None if metadata is None else member.holds_since(metadata.topic_id, partition)
            if since is None or since > member_epoch:
                return stale
        return None

    def validate_consumer_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        group = self.consumer_groups.get(group_id)
        if group is None or (member_id is None and member_epoch < 0):
            return None
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch == member.member_epoch:
            return None
        return ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH

    def _validate_commit(self, group: ClassicGroup, generation_id: int, member_id: str,
                         group_instance_id: str | None, *, transactional: bool) -> ErrorCode | None:
        if group.is_in(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_in(S.EMPTY):
            return None  # standalone commit: allowed while nobody uses the group
        if generation_id >= 0 or member_id or group_instance_id is not None:
            invalid = group.validate_member(member_id, group_instance_id)
            if invalid is not None:
                return ErrorCode[invalid]
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not transactional and not group.is_in(S.EMPTY):
            # TxnOffsetCommit before v3 carries no member id or generation: Kafka accepts it.
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and group.is_in(S.COMPLETING_REBALANCE):
            # The member knows the new generation but has no assignment yet. Transactional
            # commits do not look at the group's state (Kafka).
            return ErrorCode.REBALANCE_IN_PROGRESS
        return None

    def replay_offset(self, record: CoordinatorRecord, producer_id: int = NO_PRODUCER_ID) -> None:
        """Apply an offset record, in log order: from a write that became durable, or read back
        from the log. ``producer_id`` is the producer of a transactional batch, whose offsets
        stay pending until its marker."""
        key = record.key
        assert isinstance(key, OffsetCommitKey)
        self.record_position += 1
        if record.value is None:
            self.offsets.remove(key.group, key.topic, key.partition)
            # A tombstone also drops every pending transactional offset of the partition.
            self.pending_txn_offsets.remove_partition(key.group, key.topic, key.partition)
            return
        assert isinstance(record.value, OffsetCommitValue)
        # Offsets without a group (standalone commits) live in a simple group; a consumer
        # group's offsets are its own (an id names a classic or a consumer group, never both).
        if key.group not in self.consumer_groups:
            self.get_or_create_simple_group(key.group)
        value = OffsetAndMetadata.from_value(record.value, self.record_position)
        if producer_id == NO_PRODUCER_ID:
            self.offsets.put(key.group, key.topic, key.partition, value)
        else:
            self.pending_txn_offsets.put(producer_id, key.group, key.topic, key.partition, value)

    # Transactions (TxnOffsetCommit and markers) ------------------------------------------

    def commit_txn_offsets(self, token: int, req: TxnCommitRequest) -> None:
        """TxnOffsetCommit: validate as Kafka does, write the offsets as a transactional batch of
        the producer, keep them pending once durable, answer."""
        def all_failed(error: ErrorCode) -> Body:
            return {"topics": [(topic, [(p.partition, error) for p in parts]) for topic, parts in req.topics]}

        if req.producer_id < 0:
            # Without a producer the batch would not be transactional and the offsets would be
            # committed at once. Kafka's transaction verification refuses such a producer id.
            self.reply(token, all_failed(ErrorCode.INVALID_PRODUCER_ID_MAPPING))
            return
        error: ErrorCode | None
        if req.group_id in self.consumer_groups:
            error = self.validate_consumer_commit(
                req.group_id, req.member_id, req.generation_id, req.version,
                [(topic, p.partition) for topic, parts in req.topics for p in parts],
                transactional=True, instance_id=req.group_instance_id)
        else:
            group = self.groups.get(req.group_id)
            if group is None:
                if req.generation_id >= 0:
                    # Unlike OffsetCommit v9+, never GROUP_ID_NOT_FOUND here (Kafka).
                    self.reply(token, all_failed(ErrorCode.ILLEGAL_GENERATION))
                    return
                group = self.get_or_create_simple_group(req.group_id)
            error = self._validate_commit(group, req.generation_id, req.member_id, req.group_instance_id,
                                          transactional=True)
        if error is not None:
            self.reply(token, all_failed(error))
            return
        results: PartitionErrors = []
        records: list[CoordinatorRecord] = []
        for topic, partitions in req.topics:
            topic_results: list[tuple[int, ErrorCode]] = []
            for p in partitions:
                metadata = p.metadata or ""
                if p.metadata is not None and len(metadata) > self.config.offset_metadata_max_bytes:
                    topic_results.append((p.partition, ErrorCode.OFFSET_METADATA_TOO_LARGE))
                    continue
                topic_results.append((p.partition, ErrorCode.NONE))
                value = OffsetCommitValue(p.offset, metadata, self.now_ms, p.leader_epoch)
                records.append(CoordinatorRecord(OffsetCommitKey(req.group_id, topic, p.partition), value))
            results.append((topic, topic_results))
        if not records:
            self.reply(token, {"topics": results})
            return

        def after(error: ErrorCode) -> None:
            if error != ErrorCode.NONE:
                self.reply(token, all_failed(error))
                return
            for record in records:
                self.replay_offset(record, req.producer_id)
            self.reply(token, {"topics": results})

        self.write_transactional(req.producer_id, req.producer_epoch, records, after)

    def complete_transaction(self, producer_id: int, committed: bool) -> None:
        """The transaction marker of ``producer_id`` is in the log: its pending offsets become
        the committed ones (commit) or are dropped (abort). Replaying a marker again, or one
        for a producer without pending offsets here, changes nothing."""
        pending = self.pending_txn_offsets.complete(producer_id)
        if pending is None:
            return
        if not committed:
            log.debug("producer %d: aborted %d transactional offsets", producer_id, len(pending))
            return
        for group, topic, partition, value in pending.all_entries():
            existing = self.offsets.get(group, topic, partition)
            # A plain commit written after the transactional one wins (Kafka compares record
            # offsets: a compacted log must materialise the same offset).
            if existing is None or value.record_position > existing.record_position:
                self.offsets.put(group, topic, partition, value)
        log.debug("producer %d: committed %d transactional offsets", producer_id, len(pending))

    # OffsetFetch -------------------------------------------------------------------------

    def fetch_offsets(self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None,
                      require_stable: bool = False) -> list[Body]:
        """Committed offsets as ``[{"name", "partitions": [...]}]``; ``topics`` None means all.

        An unknown group is not an error for the classic protocol: its offsets are just unset.
        With ``require_stable`` (KIP-447) a partition with pending transactional offsets answers
        UNSTABLE_OFFSET_COMMIT, so the consumer retries until the transaction is over; listing
        all offsets reports only partitions that have a committed offset, as Kafka does.
        """
        group = self.groups.get(group_id)
        known = (group is not None and not group.is_in(S.DEAD)) or group_id in self.consumer_groups
        pending = self.pending_txn_offsets

        def fetched(topic: str, partition: int, value: OffsetAndMetadata | None) -> Body:
            if require_stable and pending.has_pending(group_id, topic, partition):
                return self._fetched(partition, None, ErrorCode.UNSTABLE_OFFSET_COMMIT)
            return self._fetched(partition, value)

        if topics is None:
            if not known:
                return []
            return [{"name": topic, "partitions": [fetched(topic, p, value) for p, value in sorted(parts.items())]}
                    for topic, parts in sorted(self.offsets.group_offsets(group_id).items())]
        out: list[Body] = []
        for topic, partitions in topics:
            out.append({"name": topic, "partitions": [
                fetched(topic, p, self.offsets.get(group_id, topic, p) if known else None) for p in partitions]})
        return out

    @staticmethod
    def _fetched(partition: int, value: OffsetAndMetadata | None, error: ErrorCode = ErrorCode.NONE) -> Body:
        if value is None:
            return {"partition_index": partition, "committed_offset": INVALID_OFFSET, "committed_leader_epoch": -1,
                    "metadata": "", "error_code": error}
        return {"partition_index": partition, "committed_offset": value.offset,
                "committed_leader_epoch": value.leader_epoch, "metadata": value.metadata,
                "error_code": ErrorCode.NONE}

    # OffsetDelete ------------------------------------------------------------------------

    def delete_offsets(self, token: int, group_id: str, topics: Sequence[tuple[str, Sequence[int]]]) -> None:
        subscribed: Callable[[str], bool]
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            # A consumer group's offsets of topics no member subscribes to may go at any time
            # (Kafka's ConsumerGroup has no other condition).
            names = consumer_group.subscribed_topic_names(lambda regex: matching_topics(regex, self.topics))
            subscribed = names.__contains__
        else:
            group = self.groups.get(group_id)
            if group is None or group.is_in(S.DEAD):
                self.reply(token, {"error_code": ErrorCode.GROUP_ID_NOT_FOUND, "topics": []})
                return
            if group.is_in(S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE) \
                    and not group.uses_consumer_protocol():
                self.reply(token, {"error_code": ErrorCode.NON_EMPTY_GROUP, "topics": []})
                return
            subscribed = group.is_subscribed_to
        results: PartitionErrors = []
        records: list[CoordinatorRecord] = []
        for topic, partitions in topics:
            if subscribed(topic):
                results.append((topic, [(p, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC) for p in partitions]))
                continue
            results.append((topic, [(p, ErrorCode.NONE) for p in partitions]))
            # A tombstone also goes where only a pending transactional offset exists (Kafka).
            records.extend(self.offset_tombstone(group_id, topic, p) for p in partitions
                           if self.offsets.get(group_id, topic, p) is not None
                           or self.pending_txn_offsets.has_pending(group_id, topic, p))
        self._write_and_apply(records)
        self.reply_when_written(token, {"error_code": ErrorCode.NONE, "topics": results},
                                lambda error: {"error_code": error, "topics": []})

    def _write_and_apply(self, records: list[CoordinatorRecord], then: Callable[[], None] | None = None) -> None:
        """Write offset tombstones; drop the offsets from memory once they are durable."""
        if not records:
            return

        def after(error: ErrorCode) -> None:
            if error == ErrorCode.NONE:
                for record in records:
                    if isinstance(record.key, OffsetCommitKey):
                        self.replay_offset(record)
                if then is not None:
                    then()

        self.write(records, after)

    # Expiry ------------------------------------------------------------------------------

    EXPIRATION_KEY = ("offsets-expiration",)

    def schedule_expiration(self) -> None:
        self.timers.schedule(self.EXPIRATION_KEY, self.now_ms + self.config.offsets_retention_check_interval_ms,
                             self.expire_offsets_and_groups)

    def expire_offsets_and_groups(self) -> None:
        records: list[CoordinatorRecord] = []
        for group_id, group in list(self.groups.items()):
            if self._expire_offsets(group, records) and group.is_empty:
                records.append(self.group_tombstone(group_id))
                del self.groups[group_id]
                group.transition_to(S.DEAD, self.now_ms)
                log.info("group %s: removed (empty, and its offsets expired)", group_id)
        for group_id, consumer_group in list(self.consumer_groups.items()):
            if self._expire_consumer_group_offsets(consumer_group, records) and not consumer_group.members:
                records.extend(self.consumer_group_tombstones(group_id))
                del self.consumer_groups[group_id]
                log.info("consumer group %s: removed (empty, and its offsets expired)", group_id)
        if records:
            log.info("offsets partition %d: expired %d offsets/groups", self.partition, len(records))
        self._write_and_apply(records)
        self.schedule_expiration()

    def _expire_offsets(self, group: ClassicGroup, records: list[CoordinatorRecord]) -> bool:
        """Tombstone the group's expired offsets; True if none remain (nor pending ones)."""
        group_offsets = self.offsets.group_offsets(group.group_id)
        pending = self.pending_txn_offsets
        if not group_offsets:
            return not pending.has_group(group.group_id)
        base = self._retention_base(group)
        if base is None:
            return False
        all_expired = True
        retention = self.config.offsets_retention_ms
        for topic, partitions in group_offsets.items():
            if group.is_subscribed_to(topic):
                all_expired = False
                continue
            for partition, value in partitions.items():
                # An offset with a transactional one pending stays until the transaction ends.
                if value.is_expired(self.now_ms, base(value), retention) and \
                        not pending.has_pending(group.group_id, topic, partition):
                    records.append(self.offset_tombstone(group.group_id, topic, partition))
                else:
                    all_expired = False
        # A group with open transactions holding its offsets is not removed yet.
        return all_expired and not pending.has_group(group.group_id)

    def _expire_consumer_group_offsets(self, group: ConsumerGroup, records: list[CoordinatorRecord]) -> bool:
        """Kafka's rule for a KIP-848 group: an offset of a topic no member subscribes to expires
        ``offsets.retention.minutes`` after its commit, whatever the group's state (an offset with a
        transactional one pending waits for the transaction); True if none remain."""
        group_id = group.group_id
        pending = self.pending_txn_offsets
        subscribed = group.subscribed_topic_names(lambda regex: matching_topics(regex, self.topics))
        all_expired = True
        for topic, partitions in self.offsets.group_offsets(group_id).items():
            if topic in subscribed:
                all_expired = False
                continue
            for partition, value in partitions.items():
                if value.is_expired(self.now_ms, value.commit_timestamp_ms, self.config.offsets_retention_ms) \
                        and not pending.has_pending(group_id, topic, partition):
                    records.append(self.offset_tombstone(group_id, topic, partition))
                else:
                    all_expired = False
        return all_expired and not pending.has_group(group_id)

    @staticmethod
    def _retention_base(group: ClassicGroup) -> Callable[[OffsetAndMetadata], int] | None:
        """From when an offset's retention counts, or None while the group's offsets are kept."""
        if not group.protocol_type:
            return lambda value: value.commit_timestamp_ms  # simple group
        if group.is_in(S.EMPTY):
            since = group.state_timestamp_ms
            return lambda value: since if since is not None else value.commit_timestamp_ms
        if group.uses_consumer_protocol() and group.subscribed_topics is not None and group.is_in(S.STABLE):
            return lambda value: value.commit_timestamp_ms  # only unsubscribed topics reach here
        return None

    def tombstone_deleted_topics(self, topics: set[str]) -> None:
        """Topics were deleted: their committed and pending offsets go too (Kafka's onPartitionsDeleted)."""
        doomed = {(group, topic, partition)
                  for group, topic, partition, _ in self.offsets.all_entries() if topic in topics}
        doomed.update((group, topic, partition) for _, group, topic, partition, _ in
                      self.pending_txn_offsets.all_entries() if topic in topics)
        records = [self.offset_tombstone(group, topic, partition) for group, topic, partition in sorted(doomed)]
        self._write_and_apply(records)
