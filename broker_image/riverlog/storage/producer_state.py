"""Producer state of one partition: per producer id, its epoch, its last batches and its open
transaction.

Why five batches: a producer keeps up to five requests in flight per partition and may retry any
of them; a retry of one already appended must be answered with the original offsets instead of
being written twice.

Transactions. A transactional data batch opens its producer's transaction (the first offset is
kept: the last stable offset cannot pass it) unless one is open; the marker (control batch)
closes it and records the coordinator epoch that wrote it, so a marker from an older coordinator
is refused. A completed transaction stays "unreplicated" (still holding the LSO back) until the
high watermark passes its marker, as in Kafka: otherwise a read_committed consumer could read an
aborted transaction's data before the abort marker is committed.

Snapshots. The state at log end offset ``N`` is saved as ``<20-digit N>.producer-snapshot``
(our own format: Kafka's ``.snapshot`` keeps only one batch per producer, and we do not want
Kafka's tools to misread ours). Written at every segment roll and at clean shutdown; a reopen
loads the newest valid snapshot at or below the log end offset and replays the batch headers
after it. Layout, big-endian::

    magic "RLPS" | version int16 (2) | crc uint32 (CRC-32C of everything after it)
    offset int64 | producer count int32
    per producer: id int64, epoch int16, last timestamp int64,
        coordinator epoch int32, current transaction first offset int64 (-1: none),
        batch count int8,
        per batch: first seq int32, last seq int32, first offset int64, last offset int64,
                   log append time int64 (-1 for CreateTime)

Version 1 (before transactions) lacks the two transaction fields; it is still read.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.record_batch import INT32_MAX, BatchHeader, TxnMarker
from .files import atomic_write, offset_file_name, parse_offset_file_name

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".producer-snapshot"
SNAPSHOTS_TO_KEEP = 3

_MAGIC = b"RLPS"
_VERSION = 2
_PREFIX = struct.Struct(">4shI")
_HEAD = struct.Struct(">qi")
_PRODUCER_V1 = struct.Struct(">qhqb")
_PRODUCER = struct.Struct(">qhqiqb")
_BATCH = struct.Struct(">iiqqq")


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 when the batch kept CreateTime


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker closed: its first data offset and the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    last_timestamp: int
    batches: list[BatchMetadata] = field(default_factory=list)
    coordinator_epoch: int = -1  # of the last marker written for this producer
    current_txn_first_offset: int = -1  # first offset of its open transaction; -1: none open

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def copy(self) -> ProducerEntry:
        return ProducerEntry(
            self.producer_id,
            self.epoch,
            self.last_timestamp,
            list(self.batches),
            self.coordinator_epoch,
            self.current_txn_first_offset,
        )

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def record(
        self,
        header: BatchHeader,
        first_offset: int,
        last_offset: int,
        log_append_time: int,
        marker: TxnMarker | None = None,
    ) -> CompletedTxn | None:
        """Remember one appended batch (its offsets as assigned, not as the client sent them);
        ``marker`` is what a control batch holds. Returns the transaction a marker completed."""
        if header.producer_epoch != self.epoch:
            self.epoch = header.producer_epoch
            self.batches.clear()
        self.last_timestamp = max(self.last_timestamp, header.max_timestamp)
        if header.is_control:
            # Transaction markers carry no sequence numbers. A marker without an open
            # transaction (a retried WriteTxnMarkers, an empty transaction) completes nothing.
            if marker is None:
                return None
            completed = None
            if self.current_txn_first_offset >= 0:
                completed = CompletedTxn(
                    self.producer_id, self.current_txn_first_offset, last_offset, not marker.committed
                )
            self.coordinator_epoch = marker.coordinator_epoch
            self.current_txn_first_offset = -1
            return completed
        if header.is_transactional and self.current_txn_first_offset < 0:
            self.current_txn_first_offset = first_offset
        if header.base_sequence < 0:
            return None  # a coordinator's batch (transactional offset commit): no sequences
        self.batches.append(
            BatchMetadata(header.base_sequence, header.last_sequence, first_offset, last_offset, log_append_time)
        )
        if len(self.batches) > NUM_BATCHES_TO_RETAIN:
            del self.batches[0]
        return None


MAX_PRODUCER_EPOCH = 32767  # Java's Short.MAX_VALUE


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}
        # producer id -> first offset of its open transaction (the entries' own field, indexed)
        self.ongoing: dict[int, int] = {}
        # Completed transactions whose marker the high watermark has not passed yet.
        self.unreplicated: list[CompletedTxn] = []

    # --- validation (leader appends from clients) ---

    def check(
        self, header: BatchHeader, pending: dict[int, ProducerEntry], *, check_sequence: bool = True
    ) -> BatchMetadata | None:
        """Validate ``header`` against the producer's state (including batches earlier in the same
        request, held in ``pending``). Returns the original batch if this one is a duplicate.
        ``check_sequence`` False: a coordinator's own batch (Kafka's AppendOrigin.COORDINATOR),
        epoch and transaction checks only."""
        entry = pending.get(header.producer_id) or self.producers.get(header.producer_id)
        if entry is None:
            # No state: first batch of a new producer, or its state went with retention or an
            # expiry. Kafka accepts any sequence here rather than failing the producer.
            return None
        if check_sequence:
            duplicate = entry.find_duplicate(header.producer_epoch, header.base_sequence, header.last_sequence)
            if duplicate is not None:
                return duplicate
        if header.producer_epoch < entry.epoch:
            # Kafka answers a data batch of a fenced epoch INVALID_PRODUCER_EPOCH (since 2.7, so
            # that the producer can abort and retry rather than die).
            raise KafkaError(
                f"producer {header.producer_id} epoch {header.producer_epoch} is older than {entry.epoch}",
                ErrorCode.INVALID_PRODUCER_EPOCH,
            )
        if entry.current_txn_first_offset >= 0 and not header.is_transactional:
            raise KafkaError(
                f"expected a transactional write from producer {header.producer_id}: its transaction is open",
                ErrorCode.INVALID_TXN_STATE,
            )
        if not check_sequence:
            return None
        if header.producer_epoch > entry.epoch:
            if header.base_sequence != 0:
                raise KafkaError(
                    f"producer {header.producer_id} new epoch {header.producer_epoch} must start at sequence 0,"
                    f" got {header.base_sequence}",
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                )
            return None
        if not in_sequence(entry.last_seq, header.base_sequence):
            raise KafkaError(
                f"producer {header.producer_id} sequence {header.base_sequence} does not follow {entry.last_seq}",
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            )
        return None

    def check_marker(
        self, producer_id: int, producer_epoch: int, marker: TxnMarker, pending: dict[int, ProducerEntry],
        transaction_version: int = 0,
    ) -> None:
        """Kafka's checks of a transaction marker: not for an older producer epoch, not from an
        older coordinator than the last marker's. A transaction version 2 marker (WriteTxnMarkers
        v2, Kafka 4.2's rule) carries the epoch its coordinator bumped at the transaction's end,
        so it must be above the producer's epoch here, unless it repeats one already written
        (same epoch, no transaction open) or the epoch is the last one."""
        entry = pending.get(producer_id) or self.producers.get(producer_id)
        if entry is None:
            return
        if transaction_version >= 2:
            repeat = producer_epoch == entry.epoch and (entry.current_txn_first_offset < 0
                                                        or producer_epoch == MAX_PRODUCER_EPOCH)
            stale = producer_epoch <= entry.epoch and not repeat
        else:
            stale = producer_epoch < entry.epoch
        if stale:
            raise KafkaError(
                f"marker for producer {producer_id} epoch {producer_epoch} is older than {entry.epoch}",
                ErrorCode.INVALID_PRODUCER_EPOCH,
            )
        if marker.coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(
                f"marker for producer {producer_id} from coordinator epoch {marker.coordinator_epoch},"
                f" older than {entry.coordinator_epoch}",
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
            )

    def pending_entry(self, producer_id: int, pending: dict[int, ProducerEntry], epoch: int) -> ProducerEntry:
        entry = pending.get(producer_id)
        if entry is None:
            current = self.producers.get(producer_id)
            entry = current.copy() if current else ProducerEntry(producer_id, epoch, -1)
            pending[producer_id] = entry
        return entry

    def commit(self, pending: dict[int, ProducerEntry], completed: Sequence[CompletedTxn] = ()) -> None:
        self.producers.update(pending)
        for entry in pending.values():
            self._index_txn(entry)
        self.unreplicated.extend(completed)

    def _index_txn(self, entry: ProducerEntry) -> None:
        if entry.current_txn_first_offset >= 0:
            self.ongoing[entry.producer_id] = entry.current_txn_first_offset
        else:
            self.ongoing.pop(entry.producer_id, None)

    # --- replay (recovery, follower appends) ---

    def replay(
        self, header: BatchHeader, log_append_time: int = -1, marker: TxnMarker | None = None
    ) -> CompletedTxn | None:
        if header.producer_id < 0:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_id, header.producer_epoch, -1)
        completed = entry.record(header, header.base_offset, header.last_offset, log_append_time, marker)
        self._index_txn(entry)
        if completed is not None:
            self.unreplicated.append(completed)
        return completed

    # --- transactions ---

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the earliest transaction not both complete and replicated (None:
        there is none); completed transactions whose marker is below ``high_watermark`` are
        forgotten here."""
        if self.unreplicated:
            self.unreplicated = [t for t in self.unreplicated if t.last_offset >= high_watermark]
        if not self.ongoing and not self.unreplicated:
            return None
        firsts = [*self.ongoing.values(), *(t.first_offset for t in self.unreplicated)]
        return min(firsts)

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """Kafka's LSO recorded in an aborted transaction's index entry: the first offset of the
        earliest other open transaction, else just past the marker."""
        others = [first for pid, first in self.ongoing.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        # A producer with an open transaction stays (Kafka's rule): its transaction must end first.
        expired = [
            pid
            for pid, e in self.producers.items()
            if now_ms - e.last_timestamp >= expiration_ms and e.current_txn_first_offset < 0
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def clear(self) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()

    # --- snapshots ---

    def snapshot_path(self, offset: int) -> Path:
        return self.directory / offset_file_name(offset, SNAPSHOT_SUFFIX)

    def snapshot_offsets(self) -> list[int]:
        offsets = []
        for name in os.listdir(self.directory):
            offset = parse_offset_file_name(name, SNAPSHOT_SUFFIX)
            if offset is not None:
                offsets.append(offset)
        return sorted(offsets)

    def encode(self, offset: int) -> bytes:
        body = bytearray(_HEAD.pack(offset, len(self.producers)))
        for entry in self.producers.values():
            body += _PRODUCER.pack(
                entry.producer_id,
                entry.epoch,
                entry.last_timestamp,
                entry.coordinator_epoch,
                entry.current_txn_first_offset,
                len(entry.batches),
            )
            for b in entry.batches:
                body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.log_append_time)
        return _PREFIX.pack(_MAGIC, _VERSION, crc32c.crc32c(bytes(body))) + bytes(body)

    def write_snapshot(self, offset: int, *, sync: bool) -> Path:
        path = self.snapshot_path(offset)
        atomic_write(path, self.encode(offset), sync=sync)
        self.prune_snapshots(keep=SNAPSHOTS_TO_KEEP)
        return path

    def prune_snapshots(self, *, keep: int) -> None:
        for offset in self.snapshot_offsets()[:-keep] if keep else self.snapshot_offsets():
            self.snapshot_path(offset).unlink(missing_ok=True)

    def delete_snapshots_above(self, offset: int) -> None:
        for snap in self.snapshot_offsets():
            if snap > offset:
                self.snapshot_path(snap).unlink(missing_ok=True)

    @staticmethod
    def decode(data: bytes) -> tuple[int, dict[int, ProducerEntry]] | None:
        """Parse a snapshot; None if it is damaged (a torn write or bit rot)."""
        try:
            magic, version, crc = _PREFIX.unpack_from(data, 0)
            body = data[_PREFIX.size :]
            if magic != _MAGIC or version not in (1, _VERSION) or crc32c.crc32c(body) != crc:
                return None
            offset, count = _HEAD.unpack_from(body, 0)
            pos = _HEAD.size
            producers: dict[int, ProducerEntry] = {}
            for _ in range(count):
                if version == 1:
                    pid, epoch, last_ts, nbatches = _PRODUCER_V1.unpack_from(body, pos)
                    coordinator_epoch, txn_first = -1, -1
                    pos += _PRODUCER_V1.size
                else:
                    pid, epoch, last_ts, coordinator_epoch, txn_first, nbatches = _PRODUCER.unpack_from(body, pos)
                    pos += _PRODUCER.size
                entry = ProducerEntry(pid, epoch, last_ts, [], coordinator_epoch, txn_first)
                for _ in range(nbatches):
                    entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                    pos += _BATCH.size
                producers[pid] = entry
            if pos != len(body):
                return None
            return offset, producers
        except struct.error:
            return None

    def load_latest_snapshot(self, max_offset: int) -> int | None:
        """Load the newest valid snapshot at or below ``max_offset``; returns its offset."""
        for offset in reversed(self.snapshot_offsets()):
            if offset > max_offset:
                continue
            try:
                decoded = self.decode(self.snapshot_path(offset).read_bytes())
            except OSError:
                decoded = None
            if decoded is None or decoded[0] != offset:
                continue
            self.producers = decoded[1]
            self.ongoing = {
                e.producer_id: e.current_txn_first_offset
                for e in self.producers.values()
                if e.current_txn_first_offset >= 0
            }
            return offset
        return None
