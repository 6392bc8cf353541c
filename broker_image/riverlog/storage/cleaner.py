"""Log compaction: a compacted log keeps at least the latest record of every key.

The design is Kafka's log cleaner, re-derived from its documentation:

- Only inactive segments lying entirely below the last stable offset (which the high watermark
  caps: Kafka's "first uncleanable offset" is the least of the LSO, the active segment's base and,
  when ``min.compaction.lag.ms`` is set, the first segment too young) can be cleaned, so an open
  transaction's records, and everything after them, wait until it ends. They split at the cleaner
  checkpoint (``cleaner-offset-checkpoint``) into a *clean* section, already compacted, and a
  *dirty* section written since. ``dirty / (clean + dirty)`` bytes is the dirty ratio that
  ``min.cleanable.dirty.ratio`` compares against.
- A pass builds an offset map, key -> latest offset, over the dirty section only (bounded by
  ``log.cleaner.dedupe.buffer.size``; the pass then stops at the last segment that fit), and
  recopies every cleanable segment from the start of the log, clean section included, keeping a
  record only if no later offset for its key is in the map.
- Offsets never change: kept records stay in their batch, whose base offset and last offset delta
  stay too (a batch may end up with fewer records than its offset range: gaps are normal in a
  compacted log). Batches where nothing was dropped are copied byte for byte; others are rebuilt
  from the kept records' bytes and recompressed with the batch's codec.
- Records without a key are dropped (a compacted log refuses them at produce time; they can only
  be there from before the topic became compacted).
- Tombstones (null values) are kept for ``delete.retention.ms`` after the pass that first
  cleaned them, so consumers reading the log from the start see the delete. As in Kafka since
  KIP-534 the time is stored in the batch: a batch holding tombstones gets a *delete horizon*
  (attribute bit 6, the base timestamp holds it); a later pass after that time drops them.
- The last batch of every live idempotent producer is kept even when compaction empties it (it
  then has no records, only its header), so that producer state rebuilt from the log after a
  restart still knows the producer's last sequence number; a producer whose last entry is a
  marker (its epoch bumped by an abort) keeps that marker, which holds its newest epoch.
- Transactions, as Kafka's cleaner (``CleanedTransactionMetadata``): the aborted-transaction
  indexes tell which producer's transactional batches in which offset ranges were aborted. Those
  batches are dropped and never enter the offset map, so an aborted write (an aborted
  transactional offset commit in ``__consumer_offsets``) cannot compact away an earlier committed
  value. A marker stays while any batch of its transaction was seen in the pass; once a pass
  sees none, the marker gets a delete horizon (``delete.retention.ms``, as tombstones) and a pass
  after it removes the marker (emptied instead while it is its producer's last entry). The
  cleaned segment's ``.txnindex`` keeps only the aborted transactions whose marker is kept
  because some of their batches were still seen.
- Cleaned segments are merged while the result stays under ``segment.bytes`` (and its offset
  range fits a segment's 32-bit relative offsets), so small segments become fewer large ones.

The heavy work (reading, decompressing, rewriting, fsync) runs in the caller's thread, never
holding the log's lock: it reads segments through duplicated file descriptors, and appends,
which only touch the active segment, go on meanwhile. Only :meth:`Log.replace_segments`, the
swap of old segments for a cleaned one (a few renames), takes the lock. Old segments' files stay
open for ``file.delete.delay.ms`` so fetches still streaming from them are unaffected.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ..protocol.errors import KafkaError
from ..protocol.record_batch import (
    COMPRESSION_MASK,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    INT32_MAX,
    MIN_BATCH_LENGTH,
    BatchHeader,
    RawRecord,
    assemble_batch,
    copy_record,
    corrupt,
    parse_txn_marker,
    read_header,
    records_section,
    scan_records,
    validate_batch,
)
from . import checkpoint
from .config import LONG_MAX, LogConfig
from .files import CLEANED_SUFFIX, pread_exact
from .index import OffsetIndex
from .log import Log
from .segment import AppendedBatch, LogSegment
from .txn_index import AbortedTxn

log = logging.getLogger(__name__)

DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024  # Kafka's log.cleaner.dedupe.buffer.size
# What one offset map entry costs in CPython beyond its key's bytes (dict slot, bytes and int
# objects): the dedupe buffer size is a memory budget, so entries are counted at this price.
MAP_ENTRY_OVERHEAD = 120
READ_CHUNK = 1024 * 1024
WRITE_CHUNK = 1024 * 1024


class CleanAborted(Exception):
    """The cleaner is shutting down (or the log went away): the pass stopped, nothing swapped."""


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """The topic configs compaction acts on; taken from the log's config unless given."""

    delete_retention_ms: int
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int

    @classmethod
    def of(cls, config: LogConfig) -> CompactionSettings:
        return cls(config.delete_retention_ms, config.min_cleanable_dirty_ratio, config.min_compaction_lag_ms,
                   config.max_compaction_lag_ms)


@dataclass(frozen=True, slots=True)
class CleanableRange:
    """Where a compacted log stands: what is clean, what is dirty and cleanable, and whether it
    must be cleaned whatever its dirty ratio."""

    first_dirty: int  # the clean offset: everything below was compacted by an earlier pass
    first_uncleanable: int  # a segment boundary: cleaning never reaches it
    clean_bytes: int
    dirty_bytes: int
    must_clean: bool  # max.compaction.lag.ms passed for the oldest dirty record
    delete_horizon_due: bool  # kept tombstones may now be removed

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    def should_clean(self, min_ratio: float) -> bool:
        if self.delete_horizon_due:
            return True
        return self.dirty_bytes > 0 and (self.must_clean or self.dirty_ratio > min_ratio)


@dataclass(slots=True)
class CleanStats:
    bytes_read: int = 0
    bytes_written: int = 0
    segments_before: int = 0
    segments_after: int = 0
    records_read: int = 0
    records_kept: int = 0
    batches_emptied: int = 0  # kept with no records, for their producer's sequence numbers
    aborted_batches_removed: int = 0  # data batches of aborted transactions
    markers_removed: int = 0  # transaction markers whose transaction left nothing behind
    map_keys: int = 0
    clean_offset: int = 0
    delete_horizon: int = checkpoint.NO_HORIZON
    duration_s: float = 0.0


@dataclass(frozen=True, slots=True)
class LastRecord:
    """What the cleaner must keep of a live producer (Kafka's ``LastRecord``): the batch holding
    its last data offset (its last sequence number), or, when it has none in its current epoch
    (the epoch was bumped by a marker), its newest marker of that epoch."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass(slots=True)
class _Plan:
    """A consistent view of the log taken under its lock at the start of a pass."""

    segments: list[LogSegment]  # cleanable, in order
    uppers: list[int]  # the offset each segment's range ends at (the next segment's base)
    sizes: list[int]
    fds: list[int]  # duplicates: a concurrent close of the log cannot pull them away
    range: CleanableRange
    producers: dict[int, LastRecord]  # Kafka's lastRecordsOfActiveProducers
    aborted: list[AbortedTxn]  # aborted transactions with data below the first uncleanable offset
    config: LogConfig
    truncations: int  # the log's truncation count when planned
    fds_closed: bool = field(default=False)

    def close(self) -> None:
        if not self.fds_closed:
            for fd in self.fds:
                os.close(fd)
            self.fds_closed = True


# --------------------------------------------------------------------------- planning


def _checkpointed_clean_offset(target: Log, state: checkpoint.CleanerState | None) -> tuple[int, int]:
    """(clean offset, delete horizon) from the checkpoint, reset to the log's start when out of
    range (a new log, or one truncated or emptied since)."""
    first_base = target.segments[0].base_offset
    if state is None or state.clean_offset < first_base or state.clean_offset > target.log_end_offset:
        return first_base, checkpoint.NO_HORIZON
    return state.clean_offset, state.delete_horizon


def _cleanable(
    target: Log, settings: CompactionSettings, now_ms: int, state: checkpoint.CleanerState | None
) -> tuple[CleanableRange, int]:
    """The log's cleanable range and how many of its segments it covers. Caller holds the lock."""
    first_dirty, horizon = _checkpointed_clean_offset(target, state)
    segments = target.segments
    count = 0
    clean_bytes = dirty_bytes = 0
    first_uncleanable = segments[0].base_offset
    oldest_dirty: LogSegment | None = None
    # Never at or past the first unstable offset: an open transaction (or a completed one whose
    # marker is not replicated yet) and the high watermark, which caps the last stable offset.
    stable = target.last_stable_offset()
    for i in range(len(segments) - 1):  # never the active segment
        segment, upper = segments[i], segments[i + 1].base_offset
        if upper > stable:
            break
        dirty = upper > first_dirty
        if dirty and settings.min_compaction_lag_ms > 0 and (
            segment.largest_timestamp() > now_ms - settings.min_compaction_lag_ms
        ):
            break
        if dirty:
            dirty_bytes += segment.size
            oldest_dirty = oldest_dirty or segment
        else:
            clean_bytes += segment.size
        count += 1
        first_uncleanable = upper
    must_clean = False
    if oldest_dirty is not None and settings.max_compaction_lag_ms < LONG_MAX:
        first = oldest_dirty.first_header()
        earliest = first.max_timestamp if first is not None and first.max_timestamp >= 0 else (
            oldest_dirty.largest_timestamp())
        must_clean = now_ms - earliest > settings.max_compaction_lag_ms
    horizon_due = horizon != checkpoint.NO_HORIZON and now_ms >= horizon and count > 0
    return CleanableRange(first_dirty, first_uncleanable, clean_bytes, dirty_bytes, must_clean, horizon_due), count


def cleanable_range(target: Log, now_ms: int, settings: CompactionSettings | None = None) -> CleanableRange | None:
    """How dirty a compacted log is (None for a closed or non-compacted log). Cheap: sizes and
    timestamps kept in memory, the small checkpoint file, at most one batch header read."""
    state = checkpoint.read_cleaner_state(target.directory)  # file I/O: not under the lock
    with target.lock:
        if target.closed or not target.config.compacts:
            return None
        return _cleanable(target, settings or CompactionSettings.of(target.config), now_ms, state)[0]


def _plan(target: Log, settings: CompactionSettings, now_ms: int) -> _Plan | None:
    # Only this log's single cleaner writes the checkpoint (truncation only lowers it, and a stale
    # clean offset is safe, see checkpoint.truncate_cleaner_state), so reading it first is fine.
    state = checkpoint.read_cleaner_state(target.directory)
    with target.lock:
        if target.closed or not target.config.compacts:
            return None
        cleanable, count = _cleanable(target, settings, now_ms, state)
        if count == 0:
            return None
        segments = target.segments[:count]
        uppers = [s.base_offset for s in target.segments[1 : count + 1]]
        fds = [os.dup(s.fd) for s in segments]
        # Only a producer's newest batch (or marker) matters for rebuilding its state from the log.
        producers = {
            pid: LastRecord(entry.batches[-1].last_offset if entry.batches else None, entry.epoch)
            for pid, entry in target.producers.producers.items()
        }
        aborted = target.aborted_transactions(segments[0].base_offset, cleanable.first_uncleanable)
        return _Plan(segments, uppers, [s.size for s in segments], fds, cleanable, producers, aborted,
                     target.config, target.truncations)


# --------------------------------------------------------------------------- reading


def _batches(fd: int, size: int, abort: threading.Event | None) -> Iterator[tuple[BatchHeader, bytes]]:
    """Every batch of a segment file as (header, its bytes), headers relative to those bytes."""
    pos = 0
    buf = b""
    buf_pos = 0
    while size - pos >= HEADER_SIZE:
        if abort is not None and abort.is_set():
            raise CleanAborted()
        rel = pos - buf_pos
        if len(buf) - rel < HEADER_SIZE:
            buf, buf_pos, rel = pread_exact(fd, min(READ_CHUNK, size - pos), pos), pos, 0
        header = read_header(buf, rel)
        if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > size:
            raise corrupt(f"invalid batch at position {pos} of a segment being cleaned")
        if len(buf) - rel < header.size:
            buf, buf_pos, rel = pread_exact(fd, max(min(READ_CHUNK, size - pos), header.size), pos), pos, 0
        data = buf[rel : rel + header.size]
        yield read_header(data, 0), data
        pos += header.size
    if pos != size:
        raise corrupt(f"trailing bytes at position {pos} of a segment being cleaned")


# --------------------------------------------------------------------------- transactions


class _TxnTracker:
    """Where each transaction stands as the cleaner walks the log in offset order (Kafka's
    ``CleanedTransactionMetadata``): which producers are inside an aborted transaction (from the
    aborted-transaction indexes), which inside a committed one, and so whether a data batch or a
    marker may go.

    ``cleaned_index`` collects the entries of the segment being written: an abort marker kept
    because batches of its transaction were seen in this pass keeps its entry."""

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        unique = {(t.producer_id, t.last_offset): t for t in aborted}  # one entry per marker
        self._pending = sorted(unique.values(), key=lambda t: (t.first_offset, t.last_offset))
        self._next = 0
        self._committed: set[int] = set()  # producers with batches of a committed transaction seen
        self._aborted: dict[int, tuple[AbortedTxn, bool]] = {}  # producer -> (txn, any batch seen)
        self.cleaned_index: list[AbortedTxn] = []

    def _consume_up_to(self, offset: int) -> None:
        while self._next < len(self._pending) and self._pending[self._next].first_offset <= offset:
            txn = self._pending[self._next]
            self._next += 1
            self._aborted.setdefault(txn.producer_id, (txn, False))

    def on_data_batch(self, header: BatchHeader) -> bool:
        """A data batch was read; True if it belongs to an aborted transaction (it may go)."""
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        current = self._aborted.get(header.producer_id)
        if current is not None:
            self._aborted[header.producer_id] = (current[0], True)
            return True
        self._committed.add(header.producer_id)
        return False

    def on_control_batch(self, header: BatchHeader, data: bytes) -> bool:
        """A control batch was read; True if it may go: a marker whose transaction had no batch
        left in this pass, or a control batch a previous pass already emptied."""
        self._consume_up_to(header.last_offset)
        if header.record_count == 0:
            return True
        marker = parse_txn_marker(data, header)
        if marker is None:
            return False  # another kind of control record: kept
        if marker.committed:
            if header.producer_id in self._committed:
                self._committed.discard(header.producer_id)
                return False
            return True
        current = self._aborted.pop(header.producer_id, None)
        if current is not None and current[1]:
            # Batches of the transaction were still there: the marker and its index entry stay.
            self.cleaned_index.append(current[0])
            return False
        return True


def _build_offset_map(
    plan: _Plan, budget: int, abort: threading.Event | None, stats: CleanStats
) -> tuple[dict[bytes, int], int]:
    """key -> latest offset over the dirty segments, whole segments only, until ``budget`` bytes
    of map are used. Returns the map and the offset the pass stops at (a segment boundary)."""
    offsets: dict[bytes, int] = {}
    used = 0
    stop = plan.range.first_dirty
    # Records of aborted transactions never enter the map: an aborted write must not supersede
    # the committed value before it.
    txns = _TxnTracker(t for t in plan.aborted if t.last_offset >= plan.range.first_dirty)
    for segment, upper, size, fd in zip(plan.segments, plan.uppers, plan.sizes, plan.fds, strict=True):
        if upper <= plan.range.first_dirty:
            continue  # clean: its keys were deduplicated by an earlier pass
        if used > budget and stop > plan.range.first_dirty:
            break  # the map is full; later segments wait for the next pass
        for header, data in _batches(fd, size, abort):
            if header.is_control:
                txns.on_control_batch(header, data)
                continue
            if txns.on_data_batch(header):
                continue
            for record in scan_records(records_section(data, header), header):
                if record.key is None:
                    continue
                if record.key not in offsets:
                    used += len(record.key) + MAP_ENTRY_OVERHEAD
                offsets[record.key] = record.offset
        stop = upper
        log.debug("offset map: %s up to %d, %d keys", segment.log_path.name, upper, len(offsets))
    stats.map_keys = len(offsets)
    return offsets, stop


# --------------------------------------------------------------------------- rewriting


@dataclass(slots=True)
class _Filtered:
    data: bytes | None  # the batch to write, None to drop it
    horizon: int | None  # delete horizon of kept tombstones, if any
    kept: int
    read: int
    emptied: bool = False
    aborted: bool = False  # a data batch of an aborted transaction, dropped (or emptied)
    marker: bool = False  # a marker dropped: its transaction left nothing behind


def _is_last_of_producer(header: BatchHeader, producers: dict[int, LastRecord]) -> bool:
    """Whether the batch holds what producer state needs of a live producer (Kafka's
    ``isBatchLastRecordOfProducer``): the batch of its last data offset, else, when it has no data
    in its current epoch, a marker of that epoch."""
    if header.producer_id < 0:
        return False
    last = producers.get(header.producer_id)
    if last is None:
        return False
    if last.last_data_offset is not None:
        return header.last_offset == last.last_data_offset
    return header.is_control and header.producer_epoch == last.producer_epoch


def _empty_batch(header: BatchHeader) -> bytes:
    """The batch's header alone: base offset, last offset delta, producer id, epoch, base sequence
    and the transactional and control bits intact, no records."""
    return assemble_batch(
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=header.attributes & ~(COMPRESSION_MASK | DELETE_HORIZON_MASK),
        last_offset_delta=header.last_offset_delta,
        base_timestamp=header.max_timestamp,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        record_count=0,
        records=b"",
    )


def _filter_batch(
    header: BatchHeader,
    data: bytes,
    offsets: dict[bytes, int],
    txns: _TxnTracker,
    producers: dict[int, LastRecord],
    now_ms: int,
    delete_retention_ms: int,
) -> _Filtered:
    # Stored batches passed validation once; checking the CRC again costs little and keeps a
    # corrupt batch from being recompressed into a valid-looking one.
    validate_batch(data, header, compacted=True)
    horizon = header.delete_horizon_ms
    # Kafka's checkBatchRetention. A marker rides on the tombstone logic: once no batch of its
    # transaction is left (may_discard) it gets a delete horizon, and goes in a pass after it.
    if header.is_control:
        may_discard = txns.on_control_batch(header, data)
        discard_records = may_discard and horizon is not None and horizon <= now_ms
    else:
        may_discard = discard_records = txns.on_data_batch(header)  # an aborted transaction's batch
    retain_empty = _is_last_of_producer(header, producers)
    if discard_records and not retain_empty:
        return _Filtered(None, None, 0, header.record_count, aborted=not header.is_control,
                         marker=header.is_control)
    payload = records_section(data, header)
    records = scan_records(payload, header)
    kept: list[RawRecord] = []
    if discard_records:
        pass  # kept only as its producer's last entry: no records
    elif header.is_control:
        kept = records
    else:
        for record in records:
            if record.key is None:
                continue
            latest = offsets.get(record.key)
            if latest is not None and record.offset < latest:
                continue  # superseded by a later record with the same key
            if not record.has_value and horizon is not None and now_ms >= horizon:
                continue  # a tombstone past its delete horizon
            kept.append(record)
    # What a horizon is kept for: tombstones, or a marker that may go once it passes.
    timed = any(not r.has_value for r in kept) or (header.is_control and may_discard and bool(kept))
    if not kept:
        dropped_aborted = discard_records and not header.is_control
        if not retain_empty:
            # Kafka's DELETE_EMPTY: a batch left with no records goes (one emptied by an earlier
            # pass too, once it is no longer its producer's last).
            return _Filtered(None, None, 0, len(records), aborted=dropped_aborted, marker=header.is_control)
        if not records:
            return _Filtered(data, None, 0, 0)  # emptied by an earlier pass, still needed
        # So the producer's last sequence (or newest epoch) survives a restart.
        return _Filtered(_empty_batch(header), None, 0, len(records), emptied=True, aborted=dropped_aborted)
    if len(kept) == len(records) and (horizon is not None or not timed):
        return _Filtered(data, horizon if timed else None, len(kept), len(records))
    attributes = header.attributes
    base_timestamp = header.base_timestamp
    rebase: int | None = None
    if timed and horizon is None:
        # First pass over these tombstones (or this marker's empty transaction): their retention
        # starts now. The horizon takes the base timestamp's place, so record timestamp deltas
        # are recomputed against it.
        horizon = now_ms + delete_retention_ms
        attributes |= DELETE_HORIZON_MASK
        base_timestamp = rebase = horizon
    # LogAppendTime: every record's time is the batch's max timestamp, whichever records remain.
    max_timestamp = header.max_timestamp if header.is_log_append_time else max(r.timestamp for r in kept)
    rebuilt = assemble_batch(
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,  # offsets never move
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        record_count=len(kept),
        records=b"".join(copy_record(payload, r, rebase) for r in kept),
    )
    return _Filtered(rebuilt, horizon if timed else None, len(kept), len(records))


class _GroupWriter:
    """Writes one cleaned segment, ``<base>.log.cleaned`` and its indexes, for a group of old
    segments; the indexes are built as batches are written (LogSegment's own indexing)."""

    def __init__(self, target: Log, base: int, now_ms: int) -> None:
        self.base = base
        self.segment = LogSegment.create(target.directory, base, now_ms=now_ms, suffix=CLEANED_SUFFIX)
        self.interval = target.config.index_interval_bytes
        self.pending = bytearray()
        self.pending_batches: list[AppendedBatch] = []
        self.size = 0
        self.last_offset = base - 1

    def add(self, data: bytes, last_offset: int, max_timestamp: int) -> None:
        self.pending_batches.append((len(self.pending), len(data), last_offset, max_timestamp))
        self.pending += data
        self.size += len(data)
        self.last_offset = last_offset
        if len(self.pending) >= WRITE_CHUNK:
            self._write()

    def _write(self) -> None:
        if self.pending_batches:
            self.segment.append(memoryview(self.pending), self.pending_batches, self.interval)
            self.pending = bytearray()
            self.pending_batches = []

    def finish(self) -> None:
        """Everything written and fsynced: the files are ready to be swapped in."""
        self._write()
        self.segment.on_become_inactive()  # the final time index entry, as at a roll
        self.segment.flush()
        self.segment.close()

    def discard(self) -> None:
        self.segment.delete_files()


def _fits(writer: _GroupWriter, upper: int, size: int, config: LogConfig) -> bool:
    """Whether a segment of ``size`` bytes ending before ``upper`` can join the group: the result
    must stay under segment.bytes (the old size bounds the cleaned one), its offsets must fit the
    index's 32-bit relative offsets, and its index must fit segment.index.bytes."""
    if writer.size + size > config.segment_bytes:
        return False
    if upper - 1 - writer.base > INT32_MAX:
        return False
    entries = (writer.size + size) // max(1, config.index_interval_bytes) + 1
    return entries < config.segment_index_bytes // OffsetIndex.entry.size


def clean(
    target: Log,
    now_ms: int,
    *,
    settings: CompactionSettings | None = None,
    dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
    abort: threading.Event | None = None,
) -> CleanStats | None:
    """One compaction pass over ``target``, whatever its dirty ratio (the scheduler decides when).

    Returns None if there was nothing to clean. Raises :class:`CleanAborted` when ``abort`` is
    set or the log changed under the pass (truncation, deletion, retention of a segment being
    cleaned): nothing is lost then, the next pass starts over. Runs in a worker thread.
    """
    started = time.monotonic()
    settings = settings or CompactionSettings.of(target.config)
    plan = _plan(target, settings, now_ms)
    if plan is None:
        return None
    stats = CleanStats()
    writer: _GroupWriter | None = None
    try:
        offsets, stop = _build_offset_map(plan, dedupe_buffer_size, abort, stats)
        config = plan.config
        horizon = checkpoint.NO_HORIZON
        group: list[LogSegment] = []
        group_upper = stop
        # One walk over the whole cleaned range, as Kafka carries its transaction state across groups.
        txns = _TxnTracker(plan.aborted)
        for segment, upper, size, fd in zip(plan.segments, plan.uppers, plan.sizes, plan.fds, strict=True):
            if upper > stop:
                break
            if writer is not None and not _fits(writer, upper, size, config):
                _swap(target, plan, writer, group, group_upper, now_ms, stats, txns.cleaned_index)
                writer, group = None, []
            if writer is None:
                writer = _GroupWriter(target, segment.base_offset, now_ms)
                txns.cleaned_index = []
            group.append(segment)
            group_upper = upper
            stats.segments_before += 1
            stats.bytes_read += size
            for header, data in _batches(fd, size, abort):
                result = _filter_batch(header, data, offsets, txns, plan.producers, now_ms,
                                       settings.delete_retention_ms)
                stats.records_read += result.read
                stats.records_kept += result.kept
                stats.aborted_batches_removed += result.aborted
                stats.markers_removed += result.marker
                if result.data is None:
                    continue
                stats.batches_emptied += result.emptied
                if result.horizon is not None:
                    horizon = result.horizon if horizon == checkpoint.NO_HORIZON else min(horizon, result.horizon)
                filtered = read_header(result.data, 0)
                writer.add(result.data, filtered.last_offset, filtered.max_timestamp)
        if writer is not None:
            _swap(target, plan, writer, group, group_upper, now_ms, stats, txns.cleaned_index)
            writer = None
        with target.lock:
            if target.closed or target.truncations != plan.truncations:
                raise CleanAborted()
            clean_offset = min(stop, target.log_end_offset)
            checkpoint.write_cleaner_state(target.directory, checkpoint.CleanerState(clean_offset, horizon))
        stats.clean_offset = clean_offset
        stats.delete_horizon = horizon
        stats.duration_s = time.monotonic() - started
        return stats
    except (OSError, KafkaError) as exc:
        if _moved_on(target, plan):
            # The log was closed, deleted or truncated under the pass: what failed was reading a
            # file that changed, not the log being uncleanable.
            raise CleanAborted() from exc
        raise
    finally:
        if writer is not None:
            writer.discard()
        plan.close()


def _moved_on(target: Log, plan: _Plan) -> bool:
    with target.lock:
        if target.closed or target.truncations != plan.truncations:
            return True
        live = {id(s) for s in target.segments}
        return any(id(s) not in live or s.deleted or s.size != size for s, size in zip(plan.segments, plan.sizes,
                                                                                       strict=True))


def _swap(
    target: Log, plan: _Plan, writer: _GroupWriter, group: list[LogSegment], upper: int, now_ms: int,
    stats: CleanStats, aborted: list[AbortedTxn],
) -> None:
    writer.finish()
    # The swap hands the cleaned segment every entry of the segments it replaces; under the same
    # hold of the lock it gets only those still relevant (Kafka's cleaned .txnindex), so no
    # read_committed fetch sees an entry whose marker this pass removed.
    with target.lock:
        if not target.replace_segments(group, upper, now_ms, truncations=plan.truncations):
            writer.discard()
            raise CleanAborted()
        cleaned = next(s for s in target.segments if s.base_offset == writer.base)
        if cleaned.txn_index.entries != aborted:
            cleaned.txn_index.replace(aborted)
    stats.bytes_written += writer.size
    stats.segments_after += 1
