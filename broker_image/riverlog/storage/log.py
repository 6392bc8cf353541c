"""A partition's log: an ordered list of segments in one directory, in Kafka's on-disk layout.

Directory contents::

    00000000000000000000.log / .index / .timeindex   segments (see segment.py, index.py)
    <offset>.producer-snapshot                        idempotent producer state (producer_state.py)
    leader-epoch-checkpoint                           leader epoch cache (epoch_cache.py)
    partition-state.checkpoint                        log start offset, recovery point, high watermark
    .riverlog-clean-shutdown                          present only between a clean close and the next open
    *.deleted                                         removed segments, unlinked after file.delete.delay.ms
    cleaner-offset-checkpoint                         how far compaction got (compacted logs, cleaner.py)
    *.cleaned / *.swap / <base>.swap-range            a compaction swap in progress (finished or undone at open)

Threading: the event loop appends and reads; flush(), open() and maintenance() may run in a thread
pool. One lock guards the in-memory state; fsyncs happen outside it so a slow disk does not stall
appends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from riverlog.protocol.errors import ErrorCode, KafkaError
from riverlog.protocol.file_region import FileRegion
from riverlog.protocol.record_batch import (
    BatchHeader,
    decode_records,
    iter_batches,
    patch_offset_and_epoch,
    read_header,
    records_section,
    scan_records,
    set_log_append_time,
    validate_batch,
)
from riverlog.storage import checkpoint
from riverlog.storage.config import LogConfig
from riverlog.storage.epoch_cache import LeaderEpochCache
from riverlog.storage.files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_RANGE_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    atomic_write,
    fsync_dir,
    fsync_path,
    offset_file_name,
    parse_offset_file_name,
)
from riverlog.storage.producer_state import ProducerEntry, ProducerStateManager
from riverlog.storage.segment import AppendedBatch, LogSegment

HIGH_WATERMARK_SENTINEL = -1  # DeleteRecords: "up to the high watermark"

SegmentPredicate = Callable[[LogSegment, "LogSegment | None"], bool]


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


class Log:
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
        self._pending_deletion: list[tuple[LogSegment, int | None]] = []  # (segment, unlink due at)
        # Bumped by every truncation: a compaction pass planned before one must not swap after it.
        self.truncations = 0
        self._closed = False

    # ------------------------------------------------------------------ opening and recovery

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, now_ms: int) -> Log:
        """Open (creating if needed) the log in ``directory``, recovering it after a crash."""
        directory.mkdir(parents=True, exist_ok=True)
        log = cls(directory, config)
        log._load(now_ms)
        return log

    def _load(self, now_ms: int) -> None:
        directory = self.directory
        clean = checkpoint.has_clean_shutdown(directory)
        state = checkpoint.read_state(directory)
        if state is None:
            clean = False
        bases = self._tidy_directory()
        interval = self.config.index_interval_bytes
        self.segments = [LogSegment.open(directory, base, now_ms=now_ms) for base in bases]
        if not self.segments:
            start = state.log_start_offset if state else 0
            self.segments = [LogSegment.create(directory, start, now_ms=now_ms)]

        epochs_loaded = self.epochs.load()
        recover_from: int | None = None
        if clean:
            last = self.segments[-1]
            if not last.indexes_look_valid() or not last.load_tail_state(interval):
                recover_from = len(self.segments) - 1
        else:
            # Validate from the segment holding the recovery point on: everything below it was
            # fsynced. Without a state file that is every segment (a full scan, the price of a
            # lost checkpoint).
            recovery_point = state.recovery_point if state else 0
            recover_from = max(0, bisect_right(bases, recovery_point) - 1)
        for segment in self.segments[: recover_from if recover_from is not None else -1]:
            if not segment.indexes_look_valid():
                segment.rebuild_indexes(interval)
        if recover_from is not None:
            self._recover_segments(recover_from)
        for segment, following in zip(self.segments, self.segments[1:], strict=False):
            segment.next_offset = following.base_offset
            segment.inactive = True
            if segment.indexes_checked:  # rebuilt or recovered: finish it as a roll would have
                segment.on_become_inactive()
        self.log_end_offset = self.segments[-1].next_offset

        if not epochs_loaded:
            self._rebuild_epochs_from_log()
        # An epoch may start exactly at the log end (a leader that has not appended yet).
        self.epochs.truncate_from_end(self.log_end_offset + 1)

        start = state.log_start_offset if state else self.segments[0].base_offset
        self.log_start_offset = min(max(start, self.segments[0].base_offset), self.log_end_offset)
        self.epochs.truncate_from_start(self.log_start_offset)
        self.high_watermark = self._clamp(state.high_watermark if state else 0)
        self._rebuild_producer_state()
        if recover_from is not None:
            # What recovery validated may still sit dirty in the page cache: make it durable so the
            # recovery point can move to the log end.
            for segment in self.segments[recover_from:]:
                segment.flush()
        self.recovery_point = self.log_end_offset
        self.epochs.write(sync=True)
        checkpoint.write_state(directory, self._state(), sync=True)
        checkpoint.clear_clean_shutdown(directory)

    def _tidy_directory(self) -> list[int]:
        """Remove leftovers of interrupted operations; return the segment base offsets."""
        self._complete_swaps()
        names = os.listdir(self.directory)
        bases = sorted(b for n in names if (b := parse_offset_file_name(n, LOG_SUFFIX)) is not None)
        known = set(bases)
        for name in names:
            orphan_index = any(
                (b := parse_offset_file_name(name, suffix)) is not None and b not in known
                for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
            )
            if name.endswith((DELETED_SUFFIX, ".tmp", CLEANED_SUFFIX, SWAP_SUFFIX)) or orphan_index:
                (self.directory / name).unlink(missing_ok=True)
        return bases

    def _complete_swaps(self) -> None:
        """Finish a compaction swap that a crash interrupted (see :meth:`replace_segments`).

        ``<base>.log.swap`` beside ``<base>.swap-range`` means the swap was committed: the old
        segments with base offsets in [base, upper) go and the ``.swap`` files take their names.
        Without the ``.log.swap`` the swap either never committed (``.cleaned`` files, removed by
        the tidy-up) or already completed; either way only the range file is left to remove.
        """
        directory = self.directory
        names = os.listdir(directory)
        finished = False
        for name in names:
            base = parse_offset_file_name(name, SWAP_RANGE_SUFFIX)
            if base is None:
                continue
            swap_log = directory / (offset_file_name(base, LOG_SUFFIX) + SWAP_SUFFIX)
            try:
                upper = int((directory / name).read_text().strip())
            except (OSError, ValueError):
                upper = None  # written atomically, so never torn; unreadable means not ours
            if upper is not None and swap_log.exists():
                for other in names:
                    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                        old_base = parse_offset_file_name(other, suffix)
                        if old_base is not None and base <= old_base < upper:
                            (directory / other).unlink(missing_ok=True)
                # Indexes first, the log last, as the live swap does; a missing index is rebuilt.
                for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX):
                    final = directory / offset_file_name(base, suffix)
                    swapped = final.with_name(final.name + SWAP_SUFFIX)
                    if swapped.exists():
                        os.replace(swapped, final)
            (directory / name).unlink(missing_ok=True)
            finished = True
        if finished:
            fsync_dir(directory)

    def _recover_segments(self, first: int) -> None:
        """Validate segments ``first``.. (crash recovery); a torn or corrupt batch ends the log there:
        the segment is cut and every later segment removed, so offsets stay contiguous."""
        interval = self.config.index_interval_bytes
        self.epochs.truncate_from_end(self.segments[first].base_offset)

        def on_batch(header: BatchHeader) -> None:
            # Recovery only moves epochs forward (Kafka's rule); appends use the full assign.
            if header.partition_leader_epoch > self.epochs.latest_epoch:
                self.epochs.assign(header.partition_leader_epoch, header.base_offset)

        for i in range(first, len(self.segments)):
            segment = self.segments[i]
            truncated = segment.recover(interval, on_batch)
            if truncated and i + 1 < len(self.segments):
                for later in self.segments[i + 1 :]:
                    later.delete_files()
                del self.segments[i + 1 :]
                break

    def _rebuild_epochs_from_log(self) -> None:
        """The epoch checkpoint was lost: rebuild it from every batch header (costs a full scan)."""
        self.epochs.entries = []
        for segment in self.segments:
            for header in segment.iter_headers(0):
                if header.partition_leader_epoch > self.epochs.latest_epoch:
                    self.epochs.assign(header.partition_leader_epoch, header.base_offset)

    def _rebuild_producer_state(self) -> None:
        """Newest snapshot at or below the log end, then replay the batch headers after it.

        Without any snapshot this replays the whole log (a full header scan)."""
        self.producers.delete_snapshots_above(self.log_end_offset)
        self.producers.clear()
        loaded = self.producers.load_latest_snapshot(self.log_end_offset)
        start = loaded if loaded is not None else self.segments[0].base_offset
        if start >= self.log_end_offset:
            return
        interval = self.config.index_interval_bytes
        for segment in self.segments:
            if segment.next_offset <= start:
                continue
            first = segment.find_batch(start, interval) if segment.base_offset < start else None
            position = first.position if first is not None else 0
            for header in segment.iter_headers(position):
                if header.base_offset >= start:
                    self.producers.replay(header, header.max_timestamp if header.is_log_append_time else -1)

    # ------------------------------------------------------------------ small helpers

    def _clamp(self, offset: int) -> int:
        return min(max(offset, self.log_start_offset), self.log_end_offset)

    def _state(self) -> checkpoint.PartitionState:
        return checkpoint.PartitionState(self.log_start_offset, self.recovery_point, self.high_watermark)

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaError(f"log {self.directory} is closed", ErrorCode.KAFKA_STORAGE_ERROR)

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
            return self.high_watermark

    # ------------------------------------------------------------------ appending

    def append_as_leader(
        self, records: bytes | bytearray | memoryview, *, leader_epoch: int, now_ms: int, allow_control: bool = False
    ) -> AppendInfo:
        """Validate, assign offsets, check idempotence, write. All or nothing per request.

        Per batch this touches only the header and the CRC: no decompression, no per-record work.
        ``allow_control`` is for the broker's own transaction markers; clients may not send them.
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
        for header in headers:
            validate_batch(view, header, max_batch_bytes=config.max_message_bytes)
            if header.is_control and not allow_control:
                raise KafkaError("clients may not send control batches", ErrorCode.INVALID_RECORD)
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
            for header in headers:
                if header.producer_id >= 0:
                    duplicate = self.producers.check(header, pending)
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

            self._write(view, appended, first_offset, base - 1, max_timestamp, now_ms)
            self.producers.commit(pending)
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
            self._write(view, appended, first, last, max_timestamp, now_ms)
            for header in headers:
                self.producers.replay(header, header.max_timestamp if header.is_log_append_time else -1)
                if self.epochs.assign(header.partition_leader_epoch, header.base_offset):
                    self.epochs.write()
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
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(active.fd, size_before)
            raise KafkaError(f"cannot write to {active.log_path}: {exc}", ErrorCode.KAFKA_STORAGE_ERROR) from exc

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

    def roll(self, now_ms: int) -> None:
        """Start a new segment at the log end (if the active one holds anything)."""
        with self._lock:
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

    # ------------------------------------------------------------------ timestamps

    def offset_for_timestamp(self, timestamp: int, *, max_offset: int | None = None) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record at or after ``timestamp``."""
        with self._lock:
            self._check_open()
            for segment in self.segments:
                if segment.max_timestamp < timestamp or segment.next_offset <= self.log_start_offset:
                    continue
                found = self._search_timestamp(segment, timestamp)
                if found is not None:
                    if max_offset is not None and found[0] >= max_offset:
                        return None
                    return found
            return None

    def _search_timestamp(self, segment: LogSegment, timestamp: int) -> tuple[int, int, int] | None:
        interval = self.config.index_interval_bytes
        segment.ensure_indexes(interval)
        # Batches before the one that first reached the time index entry's timestamp all have
        # smaller timestamps, so the scan may start there.
        entry = segment.time_index.lookup(timestamp)
        from_offset = max(entry[1] if entry else segment.base_offset, self.log_start_offset)
        indexed = segment.offset_index.lookup(from_offset)
        for header in segment.iter_headers(indexed[1] if indexed else 0):
            if header.last_offset < self.log_start_offset or header.max_timestamp < timestamp:
                continue
            if header.is_log_append_time:
                return (
                    max(header.base_offset, self.log_start_offset),
                    header.max_timestamp,
                    header.partition_leader_epoch,
                )
            data = segment.read_bytes(header.position, header.size)
            for record in decode_records(data, read_header(data)):
                if record.offset >= self.log_start_offset and record.timestamp >= timestamp:
                    return record.offset, record.timestamp, header.partition_leader_epoch
        return None

    def max_timestamp_offset(self) -> tuple[int, int, int] | None:
        """ListOffsets MAX_TIMESTAMP: (offset, timestamp, leader epoch) of the record with the largest
        timestamp (the first such record if several share it)."""
        with self._lock:
            self._check_open()
            best: LogSegment | None = None
            for segment in self.segments:
                if segment.max_timestamp >= 0 and (best is None or segment.max_timestamp > best.max_timestamp):
                    best = segment
            if best is None:
                return None
            header = best.find_batch(best.offset_of_max_timestamp, self.config.index_interval_bytes)
            if header is None:
                return None
            epoch = header.partition_leader_epoch
            if not header.is_log_append_time:
                data = best.read_bytes(header.position, header.size)
                for record in decode_records(data, read_header(data)):
                    if record.timestamp == header.max_timestamp:
                        return record.offset, record.timestamp, epoch
            return header.base_offset, header.max_timestamp, epoch

    # ------------------------------------------------------------------ log start, retention

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (-1: the high watermark)."""
        with self._lock:
            self._check_open()
            if offset == HIGH_WATERMARK_SENTINEL:
                offset = self.high_watermark
            if offset < 0 or offset > self.high_watermark:
                raise _out_of_range(f"offset {offset} is beyond the high watermark {self.high_watermark}")
            if offset > self.log_start_offset:
                self._advance_log_start(offset)
                self._delete_old_segments(lambda seg, nxt: nxt is not None and nxt.base_offset <= offset, None)
                checkpoint.write_state(self.directory, self._state(), sync=False)
            return self.log_start_offset

    def _advance_log_start(self, offset: int) -> None:
        self.log_start_offset = offset
        if self.epochs.truncate_from_start(offset):
            self.epochs.write()

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole segments past retention.ms / retention.bytes, or below the log start offset.

        Only segments entirely below the high watermark go. If every segment is expired, the
        active one is rolled first (a log always keeps one segment). Returns segments removed."""
        with self._lock:
            self._check_open()
            config = self.config
            removed = 0
            if config.deletes and config.retention_ms >= 0:
                removed += self._delete_old_segments(
                    lambda seg, _nxt: now_ms - seg.largest_timestamp() > config.retention_ms, now_ms
                )
            if config.deletes and config.retention_bytes >= 0:
                excess = [self.size_bytes() - config.retention_bytes]

                def over_size(seg: LogSegment, _nxt: LogSegment | None) -> bool:
                    if excess[0] - seg.size < 0:
                        return False
                    excess[0] -= seg.size
                    return True

                if excess[0] > 0:
                    removed += self._delete_old_segments(over_size, now_ms)
            start = self.log_start_offset
            removed += self._delete_old_segments(lambda _s, nxt: nxt is not None and nxt.base_offset <= start, now_ms)
            if removed:
                checkpoint.write_state(self.directory, self._state(), sync=False)
            return removed

    def _delete_old_segments(self, predicate: SegmentPredicate, now_ms: int | None) -> int:
        """Delete the oldest segments while ``predicate(segment, next segment)`` holds."""
        deletable: list[LogSegment] = []
        for i, segment in enumerate(self.segments):
            following = self.segments[i + 1] if i + 1 < len(self.segments) else None
            upper = following.base_offset if following else self.log_end_offset
            if upper > self.high_watermark or (following is None and segment.size == 0):
                break
            if not predicate(segment, following):
                break
            deletable.append(segment)
        if not deletable:
            return 0
        if len(deletable) == len(self.segments):
            self._roll(self.log_end_offset, now_ms if now_ms is not None else self.active_segment.created_ms)
        for segment in deletable:
            self.segments.remove(segment)
            if segment in self._unflushed_segments:
                self._unflushed_segments.remove(segment)
            segment.mark_deleted()
            due = None if now_ms is None else now_ms + self.config.file_delete_delay_ms
            self._pending_deletion.append((segment, due))
        if self.segments[0].base_offset > self.log_start_offset:
            self._advance_log_start(self.segments[0].base_offset)
        return len(deletable)

    def maintenance(self, now_ms: int) -> None:
        """Periodic work: retention, time-based roll of an idle segment, delayed file deletion,
        expiry of idle producers."""
        with self._lock:
            if self._closed:
                return
            self.apply_retention(now_ms)
            active = self.active_segment
            if active.time_to_roll(now_ms, now_ms, self.config.roll_ms):
                self._roll(self.log_end_offset, now_ms)
            still_pending: list[tuple[LogSegment, int | None]] = []
            for segment, due in self._pending_deletion:
                if due is None:
                    due = now_ms + self.config.file_delete_delay_ms
                if now_ms >= due:
                    segment.delete_files()
                else:
                    still_pending.append((segment, due))
            self._pending_deletion = still_pending
            self.producers.expire(now_ms, self.config.producer_id_expiration_ms)

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
        cleaner's complete, fsynced ``<base>.*.cleaned`` files, base = old[0].base_offset.

        Returns False, changing nothing, if the log moved on meanwhile (closed, truncated since
        ``truncations`` was read, or a segment removed by retention): the caller then discards
        its files.

        Crash safety. ``<base>.swap-range`` (holding ``upper``) is written first; renaming the
        ``.cleaned`` log to ``.swap`` commits; the old segments become ``*.deleted`` (their open
        files keep serving in-flight fetches until file.delete.delay.ms); the ``.swap`` files
        take their final names; the range file goes. Open finishes a committed swap from the
        range file (:meth:`_complete_swaps`) and removes an uncommitted one's ``.cleaned`` files.
        """
        if not old:
            return False
        directory = self.directory
        base = old[0].base_offset
        # Written (and fsynced) before taking the lock, so appends do not wait for it; alone,
        # without a ``.log.swap``, it means nothing and open removes it.
        range_path = directory / offset_file_name(base, SWAP_RANGE_SUFFIX)
        atomic_write(range_path, f"{upper}\n".encode(), sync=True)
        with self._lock:
            if self._closed or (truncations is not None and truncations != self.truncations):
                range_path.unlink(missing_ok=True)
                return False
            start = next((i for i, s in enumerate(self.segments) if s is old[0]), None)
            end = None if start is None else start + len(old)
            if (
                start is None
                or end is None
                or end >= len(self.segments)  # the active segment is never swapped
                or any(a is not b for a, b in zip(self.segments[start:end], old, strict=True))
                or self.segments[end].base_offset != upper
            ):
                range_path.unlink(missing_ok=True)
                return False
            suffixes = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX)  # the log last: its rename commits
            try:
                for suffix in suffixes:
                    name = offset_file_name(base, suffix)
                    os.replace(directory / (name + CLEANED_SUFFIX), directory / (name + SWAP_SUFFIX))
                fsync_dir(directory)
            except OSError:
                for suffix in suffixes:
                    name = offset_file_name(base, suffix)
                    with contextlib.suppress(OSError):
                        if (directory / (name + SWAP_SUFFIX)).exists():
                            os.replace(directory / (name + SWAP_SUFFIX), directory / (name + CLEANED_SUFFIX))
                range_path.unlink(missing_ok=True)
                raise
            for segment in old:
                if segment in self._unflushed_segments:
                    self._unflushed_segments.remove(segment)
                segment.mark_deleted()
                self._pending_deletion.append((segment, now_ms + self.config.file_delete_delay_ms))
            for suffix in suffixes:
                name = offset_file_name(base, suffix)
                os.replace(directory / (name + SWAP_SUFFIX), directory / name)
            fsync_dir(directory)
            range_path.unlink(missing_ok=True)
            cleaned = LogSegment.open(directory, base, now_ms=now_ms)
            cleaned.next_offset = upper
            cleaned.inactive = True
            self.segments[start:end] = [cleaned]
            return True

    # ------------------------------------------------------------------ truncation (followers)

    def truncate_to(self, offset: int) -> None:
        """Remove everything from ``offset`` on (the batch containing it included)."""
        with self._lock:
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
                removed = self.segments.pop()
                if removed in self._unflushed_segments:
                    self._unflushed_segments.remove(removed)
                removed.mark_deleted()
                self._pending_deletion.append((removed, None))
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
        with self._lock:
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
        self._rebuild_producer_state()
        checkpoint.write_state(self.directory, self._state(), sync=False)
        checkpoint.truncate_cleaner_state(self.directory, self.log_end_offset)

    # ------------------------------------------------------------------ leader epochs

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        with self._lock:
            if self.epochs.assign(epoch, start_offset):
                self.epochs.write()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        with self._lock:
            return self.epochs.end_offset_for_epoch(epoch, self.log_end_offset)

    # ------------------------------------------------------------------ durability and shutdown

    def flush(self) -> None:
        """fsync everything written so far, then move the recovery point up to it."""
        with self._lock:
            if self._closed:
                return
            flushed_to = self.log_end_offset
            messages = self.unflushed_messages
            segments = [*self._unflushed_segments, self.active_segment]
            self._unflushed_segments = []
            snapshots = [self.producers.snapshot_path(o) for o in self.producers.snapshot_offsets()]
        for segment in segments:
            try:
                segment.flush()
            except (OSError, ValueError):
                # A segment deleted (or a log closed) meanwhile needs no fsync.
                if not (segment.deleted or self._closed):
                    raise
        self.epochs.flush()
        for path in snapshots:
            fsync_path(path)
        fsync_dir(self.directory)
        with self._lock:
            if self._closed:
                return
            self.recovery_point = max(self.recovery_point, min(flushed_to, self.log_end_offset))
            self.unflushed_messages = max(0, self.unflushed_messages - messages)
            checkpoint.write_state(self.directory, self._state(), sync=False)
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
            checkpoint.write_state(self.directory, self._state(), sync=True)
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
