"""A partition's log: an ordered list of segments in one directory, in Kafka's on-disk layout.

Directory contents::

    00000000000000000000.log / .index / .timeindex   segments (see segment.py, index.py)
    <offset>.producer-snapshot                        producer state (producer_state.py)
    <base>.txnindex                                   aborted transactions of a segment (txn_index.py)
    leader-epoch-checkpoint                           leader epoch cache (epoch_cache.py)
    partition-state.checkpoint                        log start offset, recovery point, high watermark
    .riverlog-clean-shutdown                          present only between a clean close and the next open
    *.deleted                                         removed segments, unlinked after file.delete.delay.ms
    cleaner-offset-checkpoint                         how far compaction got (compacted logs, cleaner.py)
    *.cleaned / *.swap / <base>.swap-range            a compaction swap in progress (finished or undone at open)

This module holds appending, reading, truncation, flush and close. The other concerns of a log
live beside it, and :class:`Log` delegates to them:

    log_loader.py        opening: recovery after a crash, rebuilding epochs and producer state
    segment_swap.py      the compaction swap (replace_segments) and finishing it after a crash
    retention.py         retention, DeleteRecords (log start offset) and periodic maintenance
    timestamp_lookup.py  ListOffsets by timestamp and MAX_TIMESTAMP

Threading: the event loop appends and reads; flush(), open() and maintenance() may run in a thread
pool. One lock guards the in-memory state; fsyncs happen outside it so a slow disk does not stall
appends.

Disk errors: any OSError while writing, rolling, flushing, truncating or maintaining the log is
reported to ``on_io_error`` (the owner takes the whole log directory offline, as Kafka's
LogDirFailureChannel does) and surfaces as KAFKA_STORAGE_ERROR. The log is not patched up after
such an error: its owner abandons it, and the next start recovers what reached the disk.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.file_region import FileRegion
from ..protocol.record_batch import (
    BatchHeader,
    TxnMarker,
    build_txn_marker,
    iter_batches,
    parse_txn_marker,
    patch_offset_and_epoch,
    records_section,
    scan_records,
    set_log_append_time,
    validate_batch,
)
from . import checkpoint, retention, segment_swap, timestamp_lookup
from .config import LogConfig
from .epoch_cache import LeaderEpochCache
from .files import fsync_dir, fsync_path
from .log_loader import LogLoader, rebuild_producer_state
from .producer_state import CompletedTxn, ProducerEntry, ProducerStateManager
from .segment import AppendedBatch, LogSegment
from .txn_index import AbortedTxn


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 for CreateTime
    log_start_offset: int
    duplicate: bool
    record_count: int
    max_timestamp: int
    size_bytes: int = 0


@dataclass(frozen=True, slots=True)
class ReadInfo:
    regions: list[FileRegion]
    size: int
    first_offset: int  # base offset of the first batch returned, -1 if none
    log_start_offset: int
    log_end_offset: int
    high_watermark: int


def _out_of_range(message: str) -> KafkaError:
    return KafkaError(message, ErrorCode.OFFSET_OUT_OF_RANGE)


# Told of a disk error in a log (the log, and what failed); may be called from any thread.
IoErrorHandler = Callable[["Log", OSError], None]


class Log:
    """One partition's log. Its underscore members are private to the storage package: retention.py
    and segment_swap.py use some of them, under the lock, through the protocols they declare
    (:class:`~.retention.RetainedLog`, :class:`~.segment_swap.SwappableLog`)."""

    def __init__(self, directory: Path, config: LogConfig) -> None:
        self.directory = directory
        self.config = config
        self.segments: list[LogSegment] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        self.recovery_point = 0
        self.epochs = LeaderEpochCache(directory)
        self.producers = ProducerStateManager(directory)
        self.unflushed_messages = 0
        self._lock = threading.RLock()
        self._unflushed_segments: list[LogSegment] = []  # rolled since the last flush
        # A roll wrote a producer snapshot without fsync; the next flush syncs it.
        self._snapshot_unsynced = False
        # The state last written: an idle log's periodic flush then writes (and fsyncs) nothing.
        self._checkpointed: checkpoint.PartitionState | None = None
        self._pending_deletion: list[tuple[LogSegment, int | None]] = []  # (segment, unlink due at)
        # Bumped by every truncation: a compaction pass planned before one must not swap after it.
        self.truncations = 0
        self._closed = False
        self.on_io_error: IoErrorHandler | None = None

    @classmethod
    def unavailable(cls, directory: Path, config: LogConfig) -> Log:
        """A stand-in for a log that could not be opened (its directory is offline): every
        operation answers KAFKA_STORAGE_ERROR, nothing touches the disk."""
        log = cls(directory, config)
        log._closed = True
        return log

    # ------------------------------------------------------------------ opening (log_loader.py)

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, now_ms: int) -> Log:
        """Open (creating if needed) the log in ``directory``, recovering it after a crash."""
        directory.mkdir(parents=True, exist_ok=True)
        log = cls(directory, config)
        loaded = LogLoader(directory, config, log.epochs, log.producers).load(now_ms)
        log.segments = loaded.segments
        log.log_start_offset = loaded.log_start_offset
        log.log_end_offset = loaded.log_end_offset
        log.high_watermark = loaded.high_watermark
        log.recovery_point = loaded.recovery_point
        log._checkpointed = log._state()  # the loader wrote it
        return log

    # ------------------------------------------------------------------ small helpers

    def _clamp(self, offset: int) -> int:
        return min(max(offset, self.log_start_offset), self.log_end_offset)

    def _state(self) -> checkpoint.PartitionState:
        return checkpoint.PartitionState(self.log_start_offset, self.recovery_point, self.high_watermark)

    def checkpoint_state(self, *, sync: bool = False) -> None:
        """Write the partition's state file (log start, recovery point, high watermark)."""
        state = self._state()
        checkpoint.write_state(self.directory, state, sync=sync)
        self._checkpointed = state

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaError(f"log {self.directory} is not available", ErrorCode.KAFKA_STORAGE_ERROR)

    @contextlib.contextmanager
    def _disk(self, what: str) -> Iterator[None]:
        """Run disk work: an OSError is reported to the owner and becomes KAFKA_STORAGE_ERROR."""
        try:
            yield
        except OSError as exc:
            handler = self.on_io_error
            # A log closed meanwhile (deleted, reassigned away) explains its own missing files.
            if handler is not None and not self._closed:
                handler(self, exc)
            raise KafkaError(f"{what} {self.directory.name} failed: {exc}", ErrorCode.KAFKA_STORAGE_ERROR) from exc

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    def latest_epoch(self) -> int:
        """The newest leader epoch in the cache (-1 if none)."""
        return self.epochs.latest_epoch

    @property
    def needs_flush(self) -> bool:
        """flush.messages reached: the caller should run flush() (in its thread pool)."""
        limit = self.config.flush_messages
        return limit is not None and self.unflushed_messages >= limit

    def size_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self.segments)

    def update_high_watermark(self, offset: int) -> int:
        with self._lock:
            self.high_watermark = self._clamp(offset)
            self.producers.first_unstable_offset(self.high_watermark)  # forgets what is replicated
            return self.high_watermark

    # ------------------------------------------------------------------ transactions

    def last_stable_offset(self) -> int:
        """Kafka's LSO: the first offset of the earliest transaction not yet complete and
        replicated, capped by the high watermark. read_committed consumers read below it."""
        producers = self.producers
        if not producers.ongoing and not producers.unreplicated:
            # The common case, asked for every partition of every fetch answer: no transaction
            # is open or unreplicated. Both are changed only by appends and truncations on the
            # event loop, which is where this is asked, so no lock is needed to see them.
            return self.high_watermark
        with self._lock:
            first = self.producers.first_unstable_offset(self.high_watermark)
            return self.high_watermark if first is None else min(first, self.high_watermark)

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [start_offset, end_offset), from the segments'
        transaction indexes: an entry lives in its marker's segment, so the segments from the one
        holding ``start_offset`` on are searched (a read_committed fetch's answer)."""
        with self._lock:
            found: list[AbortedTxn] = []
            for segment in self.segments[self._segment_index(start_offset) :]:
                found.extend(segment.txn_index.overlapping(start_offset, end_offset))
            return found

    def append_txn_marker(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
        leader_epoch: int,
        now_ms: int,
        transaction_version: int = 0,
    ) -> AppendInfo:
        """Write the marker ending ``producer_id``'s transaction (WriteTxnMarkers), after Kafka's
        checks: INVALID_PRODUCER_EPOCH for an older producer epoch (for a transaction version 2
        marker, one not above the producer's epoch), TRANSACTION_COORDINATOR_FENCED for an older
        coordinator epoch than the previous marker's."""
        batch = build_txn_marker(
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            committed=committed,
            timestamp=now_ms,
        )
        return self.append_as_leader(batch, leader_epoch=leader_epoch, now_ms=now_ms, allow_control=True,
                                     marker_transaction_version=transaction_version)

    def _index_completed(self, completed: list[CompletedTxn]) -> None:
        """After a write: aborted transactions go into the index of the segment holding their
        marker (the active one: an append never spans a roll)."""
        for txn in completed:
            if txn.aborted:
                lso = self.producers.last_stable_offset_after(txn)
                self.active_segment.txn_index.append(
                    AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso)
                )

    def _retire_segment(self, segment: LogSegment, delete_due: int | None) -> None:
        """Take a segment already removed from ``segments`` out of service: renamed ``*.deleted``
        now, its files unlinked at ``delete_due`` (None: file.delete.delay.ms after the next
        maintenance run) so in-flight fetches from it finish."""
        if segment in self._unflushed_segments:
            self._unflushed_segments.remove(segment)
        segment.mark_deleted()
        self._pending_deletion.append((segment, delete_due))

    # ------------------------------------------------------------------ appending

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int,
        now_ms: int,
        allow_control: bool = False,
        from_coordinator: bool = False,
        marker_transaction_version: int = 0,
    ) -> AppendInfo:
        """Validate, assign offsets, check idempotence, write. All or nothing per request.

        Per batch this touches only the header and the CRC: no decompression, no per-record work.
        ``allow_control`` is for the broker's own transaction markers; clients may not send them.
        ``from_coordinator``: written by a coordinator of this broker (the group coordinator's
        transactional offset commits), as Kafka's AppendOrigin.COORDINATOR: base sequence -1, no
        sequence checks, but a transactional batch still opens its producer's transaction.
        """
        view = memoryview(records)
        if view.readonly:
            view = memoryview(bytearray(view))  # offsets and epochs are patched in place
        config = self.config
        headers = list(iter_batches(view))
        if len(view) > config.segment_bytes:
            raise KafkaError(
                f"{len(view)} bytes of batches exceed segment.bytes {config.segment_bytes}",
                ErrorCode.MESSAGE_TOO_LARGE,
            )
        markers: dict[int, TxnMarker | None] = {}  # by batch position
        for header in headers:
            validate_batch(view, header, max_batch_bytes=config.max_message_bytes)
            if header.is_control:
                if not allow_control:
                    raise KafkaError("clients may not send control batches", ErrorCode.INVALID_RECORD)
                markers[header.position] = parse_txn_marker(view, header)
            if config.compacts and not header.is_control:
                self._require_keys(view, header)
        log_append_time = now_ms if config.log_append_time else -1

        with self._lock:
            self._check_open()
            if not headers:
                return AppendInfo(-1, -1, log_append_time, self.log_start_offset, False, 0, -1)
            first_offset = self.log_end_offset
            next_offset = first_offset
            pending: dict[int, ProducerEntry] = {}
            completed: list[CompletedTxn] = []
            for header in headers:
                marker = markers.get(header.position)
                if marker is not None:
                    self.producers.check_marker(header.producer_id, header.producer_epoch, marker, pending,
                                                marker_transaction_version)
                    entry = self.producers.pending_entry(header.producer_id, pending, header.producer_epoch)
                    txn = entry.record(header, next_offset, next_offset + header.last_offset_delta, -1, marker)
                    if txn is not None:
                        completed.append(txn)
                elif header.producer_id >= 0 and not header.is_control:
                    duplicate = self.producers.check(header, pending, check_sequence=not from_coordinator)
                    if duplicate is not None:
                        return AppendInfo(
                            duplicate.first_offset,
                            duplicate.last_offset,
                            duplicate.log_append_time,
                            self.log_start_offset,
                            True,
                            duplicate.last_offset - duplicate.first_offset + 1,
                            -1,
                        )
                    entry = self.producers.pending_entry(header.producer_id, pending, header.producer_epoch)
                    entry.record(header, next_offset, next_offset + header.last_offset_delta, log_append_time)
                next_offset += header.last_offset_delta + 1

            # Everything is valid: stamp offsets, epochs and (LogAppendTime) timestamps.
            appended: list[AppendedBatch] = []
            base = first_offset
            max_timestamp = -1
            record_count = 0
            for header in headers:
                patch_offset_and_epoch(view, header, base, leader_epoch)
                timestamp = header.max_timestamp
                if log_append_time >= 0:
                    set_log_append_time(view, header, log_append_time)
                    timestamp = log_append_time
                last = base + header.last_offset_delta
                appended.append((header.position, header.size, last, timestamp))
                max_timestamp = max(max_timestamp, timestamp)
                record_count += header.record_count
                base = last + 1

            with self._disk("appending to"):
                self._write(view, appended, first_offset, base - 1, max_timestamp, now_ms)
                self.producers.commit(pending, completed)
                self._index_completed(completed)
                if self.epochs.assign(leader_epoch, first_offset):
                    self.epochs.write()
            self.log_end_offset = base
            self.unflushed_messages += record_count
            return AppendInfo(
                first_offset,
                base - 1,
                log_append_time,
                self.log_start_offset,
                False,
                record_count,
                max_timestamp,
                len(view),
            )

    def _require_keys(self, view: memoryview, header: BatchHeader) -> None:
        """Compaction keeps the latest record per key, so a keyless record has no place in a
        compacted log: Kafka rejects it at produce time with INVALID_RECORD, and so do we. This
        costs a decompression, paid only on compacted topics (as in Kafka)."""
        for record in scan_records(records_section(view, header), header):
            if record.key is None:
                raise KafkaError(
                    f"Compacted topic cannot accept message without key in topic partition {self.directory.name}.",
                    ErrorCode.INVALID_RECORD,
                )

    def append_as_follower(self, records: bytes | bytearray | memoryview, *, now_ms: int = 0) -> AppendInfo:
        """Append batches replicated from the leader: offsets, epochs and timestamps kept as given.

        CRCs are still checked (a corrupt replica must not be written) and producer state and the
        epoch cache are updated, without the leader-only idempotence checks.
        """
        view = memoryview(records)
        headers = list(iter_batches(view))
        for header in headers:
            validate_batch(view, header, compacted=True)  # the leader's log may be compacted
        with self._lock:
            self._check_open()
            if not headers:
                return AppendInfo(-1, -1, -1, self.log_start_offset, False, 0, -1)
            expected = self.log_end_offset
            appended: list[AppendedBatch] = []
            for header in headers:
                if header.base_offset < expected:
                    raise _out_of_range(
                        f"replicated batch at offset {header.base_offset} is below the expected {expected}"
                    )
                expected = header.next_offset
                appended.append((header.position, header.size, header.last_offset, header.max_timestamp))
            first, last = headers[0].base_offset, headers[-1].last_offset
            max_timestamp = max(h.max_timestamp for h in headers)
            markers = [parse_txn_marker(view, h) if h.is_control else None for h in headers]
            with self._disk("appending to"):
                self._write(view, appended, first, last, max_timestamp, now_ms)
                completed: list[CompletedTxn] = []
                for header, marker in zip(headers, markers, strict=True):
                    txn = self.producers.replay(
                        header, header.max_timestamp if header.is_log_append_time else -1, marker
                    )
                    if txn is not None:
                        completed.append(txn)
                    if self.epochs.assign(header.partition_leader_epoch, header.base_offset):
                        self.epochs.write()
                self._index_completed(completed)
            self.log_end_offset = last + 1
            count = sum(h.record_count for h in headers)
            self.unflushed_messages += count
            return AppendInfo(first, last, -1, self.log_start_offset, False, count, max_timestamp, len(view))

    def _write(
        self,
        data: memoryview,
        appended: list[AppendedBatch],
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        now_ms: int,
    ) -> None:
        config = self.config
        active = self.active_segment
        if (
            not active.fits_offset(first_offset)
            or not active.fits_offset(last_offset)
            or (
                active.size > 0
                and (
                    active.size + len(data) > config.segment_bytes
                    or active.time_to_roll(now_ms, max_timestamp, config.roll_ms)
                    or active.index_full(config.segment_index_bytes)
                )
            )
        ):
            self._roll(first_offset, now_ms)
            active = self.active_segment
        if not active.fits_offset(last_offset):
            raise KafkaError("append spans more offsets than a segment can index", ErrorCode.INVALID_RECORD)
        size_before = active.size
        try:
            active.append(data, appended, config.index_interval_bytes)
        except OSError:
            # Cut the partial batch off if the disk still lets us; recovery does it otherwise.
            with contextlib.suppress(OSError):
                os.ftruncate(active.fd, size_before)
            raise

    def _roll(self, new_base: int, now_ms: int) -> None:
        active = self.active_segment
        if active.size == 0:
            # Nothing in it: replace rather than keep an empty segment behind.
            if active.base_offset == new_base:
                return
            self.segments.pop()
            active.delete_files()
        else:
            active.on_become_inactive()
            self._unflushed_segments.append(active)
        self.segments.append(LogSegment.create(self.directory, new_base, now_ms=now_ms))
        # Producer state as of the new segment's base: a crash then only replays this segment.
        self.producers.write_snapshot(new_base, sync=False)
        self._snapshot_unsynced = True

    def roll(self, now_ms: int) -> None:
        """Start a new segment at the log end (if the active one holds anything)."""
        with self._lock, self._disk("rolling"):
            self._check_open()
            if self.active_segment.size > 0:
                self._roll(self.log_end_offset, now_ms)

    # ------------------------------------------------------------------ reading

    def _segment_index(self, offset: int) -> int:
        bases = [s.base_offset for s in self.segments]
        return max(0, bisect_right(bases, offset) - 1)

    def read(self, start_offset: int, max_bytes: int, *, max_offset: int, min_one_batch: bool = True) -> ReadInfo:
        """Whole batches from the one containing ``start_offset``, all entirely below ``max_offset``,
        at most ``max_bytes`` unless the first batch alone is larger and ``min_one_batch`` (KIP-74)."""
        with self._lock:
            self._check_open()
            if start_offset < self.log_start_offset or start_offset > self.log_end_offset:
                raise _out_of_range(
                    f"offset {start_offset} is outside [{self.log_start_offset}, {self.log_end_offset}]"
                )
            regions: list[FileRegion] = []
            total = 0
            first_offset = -1
            interval = self.config.index_interval_bytes
            max_offset = min(max_offset, self.log_end_offset)
            index = self._segment_index(start_offset)
            offset = start_offset
            while start_offset < max_offset and index < len(self.segments):
                segment = self.segments[index]
                header = segment.find_batch(offset, interval)
                if header is None:
                    index += 1
                    continue
                if header.last_offset >= max_offset:
                    break
                start = header.position
                limit = segment.position_below(max_offset, interval)
                budget = max_bytes - total
                end = limit if start + budget >= limit else segment.boundary_at_or_before(start + budget, start)
                if end == start:
                    if not (min_one_batch and not regions):
                        break
                    end = header.end
                regions.append(FileRegion(segment.file, start, end - start))
                total += end - start
                if first_offset < 0:
                    first_offset = header.base_offset
                if end < segment.size:
                    break
                index += 1
                offset = segment.next_offset
            return ReadInfo(
                regions, total, first_offset, self.log_start_offset, self.log_end_offset, self.high_watermark
            )

    def read_records_bytes(self, start_offset: int, max_bytes: int, *, max_offset: int | None = None) -> bytes:
        """Convenience for tools and tests: the bytes read() would send."""
        info = self.read(start_offset, max_bytes, max_offset=self.log_end_offset if max_offset is None else max_offset)
        return b"".join(os.pread(r.fileno(), r.size, r.position) for r in info.regions)

    # ------------------------------------------------------------------ timestamps (timestamp_lookup.py)

    def offset_for_timestamp(self, timestamp: int, *, max_offset: int | None = None) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record at or after ``timestamp``."""
        with self._lock:
            self._check_open()
            return timestamp_lookup.offset_for_timestamp(
                self.segments,
                self.log_start_offset,
                self.config.index_interval_bytes,
                timestamp,
                max_offset=max_offset,
            )

    def max_timestamp_offset(self) -> tuple[int, int, int] | None:
        """ListOffsets MAX_TIMESTAMP: (offset, timestamp, leader epoch) of the record with the largest
        timestamp (the first such record if several share it)."""
        with self._lock:
            self._check_open()
            return timestamp_lookup.max_timestamp_offset(self.segments, self.config.index_interval_bytes)

    # ------------------------------------------------------------------ log start, retention (retention.py)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (-1: the high watermark)."""
        with self._disk("deleting records of"):
            return retention.delete_records_before(self, offset)

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole segments past retention.ms / retention.bytes, or below the log start offset.
        Returns segments removed."""
        return retention.apply_retention(self, now_ms)

    def maintenance(self, now_ms: int) -> None:
        """Periodic work: retention, time-based roll of an idle segment, delayed file deletion,
        expiry of idle producers."""
        with self._disk("maintaining"):
            retention.run_maintenance(self, now_ms)

    # ------------------------------------------------------------------ compaction (cleaner.py)

    @property
    def lock(self) -> threading.RLock:
        """For the log cleaner: hold it to see the segments, producer state and high watermark
        consistently. Never hold it across slow work."""
        return self._lock

    @property
    def closed(self) -> bool:
        return self._closed

    def replace_segments(
        self, old: list[LogSegment], upper: int, now_ms: int, *, truncations: int | None = None
    ) -> bool:
        """Swap consecutive inactive segments ``old`` (covering [old[0].base, upper)) for the log
        cleaner's cleaned files; False, changing nothing, if the log moved on meanwhile.
        See :func:`.segment_swap.replace_segments` for the crash-safe protocol."""
        return segment_swap.replace_segments(self, old, upper, now_ms, truncations=truncations)

    # ------------------------------------------------------------------ truncation (followers)

    def truncate_to(self, offset: int) -> None:
        """Remove everything from ``offset`` on (the batch containing it included)."""
        with self._lock, self._disk("truncating"):
            self._check_open()
            if offset >= self.log_end_offset:
                # Nothing to cut, but an epoch may start at the log end: this replica led that
                # epoch without appending. The leader's log does not have it, so drop it, or the
                # follower would keep presenting it as its last fetched epoch (Kafka does the same).
                if self.epochs.truncate_from_end(self.log_end_offset):
                    self.epochs.write()
                return
            if offset < self.log_start_offset:
                self.truncate_fully_and_start_at(offset)
                return
            interval = self.config.index_interval_bytes
            while len(self.segments) > 1 and self.active_segment.base_offset >= offset:
                self._retire_segment(self.segments.pop(), None)
            active = self.active_segment
            active.inactive = False
            if not active.truncate_to(offset, interval) and not active.load_tail_state(interval):
                active.recover(interval, lambda _h: None)
            if active not in self._unflushed_segments:
                self._unflushed_segments.append(active)
            self.log_end_offset = active.next_offset
            self._after_truncation()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and restart it empty at ``offset`` (a follower far behind the leader)."""
        with self._lock, self._disk("truncating"):
            self._check_open()
            for segment in self.segments:
                segment.mark_deleted()
                self._pending_deletion.append((segment, None))
            self._unflushed_segments = []
            self.segments = [LogSegment.create(self.directory, offset, now_ms=self.active_segment.created_ms)]
            self.log_start_offset = self.log_end_offset = offset
            self.epochs.entries = []
            self._after_truncation()

    def _after_truncation(self) -> None:
        self.truncations += 1
        self.high_watermark = self._clamp(self.high_watermark)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.epochs.truncate_from_end(self.log_end_offset)
        self.epochs.write()
        rebuild_producer_state(self.producers, self.segments, self.log_end_offset, self.config.index_interval_bytes,
                               high_watermark=self.high_watermark)
        self.checkpoint_state()
        checkpoint.truncate_cleaner_state(self.directory, self.log_end_offset)

    # ------------------------------------------------------------------ leader epochs

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        with self._lock:
            if self.epochs.assign(epoch, start_offset):
                # A new leader of a log that holds nothing: the entry protects no record yet, so
                # it is synced with the first records a flush makes durable, not on its own
                # (10,000 new partitions were 20,000 fsyncs otherwise).
                empty = self.log_end_offset == self.log_start_offset
                self.epochs.write(durable=not empty)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        with self._lock:
            return self.epochs.end_offset_for_epoch(epoch, self.log_end_offset)

    # ------------------------------------------------------------------ durability and shutdown

    def flush(self) -> None:
        """fsync everything written so far, then move the recovery point up to it."""
        with self._disk("flushing"):
            self._flush()

    def _flush(self) -> None:
        # Kafka's flush writes nothing for a log with nothing new; neither does this one: with
        # 10,000 idle partitions the minute's flush was 60,000 fsyncs (10 % of a core idle).
        with self._lock:
            if self._closed:
                return
            flushed_to = self.log_end_offset
            messages = self.unflushed_messages
            segments = [*self._unflushed_segments, self.active_segment]
            self._unflushed_segments = []
            snapshot_unsynced, self._snapshot_unsynced = self._snapshot_unsynced, False
            snapshots = [self.producers.snapshot_path(o) for o in self.producers.snapshot_offsets()] \
                if snapshot_unsynced else []
        synced = False
        for segment in segments:
            try:
                synced = segment.flush() or synced
            except (OSError, ValueError):
                # A segment deleted (or a log closed) meanwhile needs no fsync.
                if not (segment.deleted or self._closed):
                    raise
        synced = self.epochs.flush(records_synced=synced) or synced
        for path in snapshots:
            fsync_path(path)
        if synced or snapshots or len(segments) > 1:
            # New files' names durable before a checkpoint that counts on them.
            fsync_dir(self.directory)
        with self._lock:
            if self._closed:
                return
            self.recovery_point = max(self.recovery_point, min(flushed_to, self.log_end_offset))
            self.unflushed_messages = max(0, self.unflushed_messages - messages)
            if self._state() == self._checkpointed:
                return
            self.checkpoint_state()
        checkpoint.sync_state(self.directory)

    def close(self) -> None:
        """Clean shutdown: everything durable and a clean-shutdown marker, so the next open is fast."""
        with self._lock:
            if self._closed:
                return
            active = self.active_segment
            active.on_become_inactive()
            for segment in [*self._unflushed_segments, active]:
                if os.fstat(segment.fd).st_size > segment.size:  # left by a failed write
                    os.ftruncate(segment.fd, segment.size)
                segment.flush()
            self.producers.write_snapshot(self.log_end_offset, sync=True)
            self.epochs.write(sync=True)
            self.recovery_point = self.log_end_offset
            self.checkpoint_state(sync=True)
            self._close_files()
            checkpoint.mark_clean_shutdown(self.directory)

    def abandon(self) -> None:
        """Close the files as a crashed process would leave them: no flush, no checkpoint, no
        clean-shutdown marker (what was written stays in the page cache, as after kill -9)."""
        with self._lock:
            if not self._closed:
                for segment in self.segments:
                    segment.close()
                self._closed = True

    def _close_files(self) -> None:
        for segment in self.segments:
            segment.close()
        for segment, _due in self._pending_deletion:
            segment.delete_files()
        self._pending_deletion = []
        self._unflushed_segments = []
        self._closed = True

    def delete(self) -> None:
        """DeleteTopics: close and remove the whole partition directory."""
        with self._lock:
            if not self._closed:
                self._close_files()
            shutil.rmtree(self.directory, ignore_errors=True)
