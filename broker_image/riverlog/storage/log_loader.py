"""Opening a partition's log directory: recovery after a crash (Kafka's LogLoader).

Opening tidies the directory (finishing or discarding an interrupted compaction swap, removing
leftovers of interrupted operations), opens the segments, validates what a crash may have torn,
and rebuilds the leader epoch cache and the producer state (with open transactions) when their
files are gone or behind the log, and the aborted transaction indexes of recovered segments.
After a clean shutdown only the active segment's tail is checked.
"""

from __future__ import annotations

import dataclasses
import os
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..protocol.errors import KafkaError
from ..protocol.record_batch import BatchHeader, TxnMarker, parse_txn_marker
from . import checkpoint
from .config import LogConfig
from .epoch_cache import LeaderEpochCache
from .files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    parse_offset_file_name,
)
from .producer_state import ProducerStateManager
from .segment import LogSegment
from .segment_swap import complete_interrupted_swaps
from .txn_index import TXN_INDEX_SUFFIX, AbortedTxn


@dataclass(frozen=True, slots=True)
class LoadedLog:
    """What the loader found: the segments and offsets a :class:`~.log.Log` starts from."""

    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    recovery_point: int


class LogLoader:
    """Loads one log directory into segments, filling in ``epochs`` and ``producers`` as it goes."""

    def __init__(
        self, directory: Path, config: LogConfig, epochs: LeaderEpochCache, producers: ProducerStateManager
    ) -> None:
        self.directory = directory
        self.config = config
        self.epochs = epochs
        self.producers = producers
        self.segments: list[LogSegment] = []

    def load(self, now_ms: int) -> LoadedLog:
        """Recover the directory; on return everything is durable and the clean-shutdown marker gone."""
        directory = self.directory
        clean = checkpoint.has_clean_shutdown(directory)
        state = checkpoint.read_state(directory)
        if state is None:
            clean = False
        bases = self._tidy_directory()
        interval = self.config.index_interval_bytes
        self.segments = [LogSegment.open(directory, base, now_ms=now_ms) for base in bases]
        # A brand-new log (no segment, no checkpoint) holds nothing to recover or make durable:
        # no scan, no fsync. Creating thousands of partitions would otherwise pay seven fsyncs
        # each; a crash before its first flush loses only empty files, which the next open makes again.
        fresh = not self.segments and state is None
        if not self.segments:
            start = state.log_start_offset if state else 0
            self.segments = [LogSegment.create(directory, start, now_ms=now_ms)]

        epochs_loaded = self.epochs.load()
        recover_from: int | None = None
        if fresh:
            pass  # nothing written yet: nothing to validate
        elif clean:
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
        log_end_offset = self.segments[-1].next_offset

        if not epochs_loaded:
            self._rebuild_epochs_from_log()
        # An epoch may start exactly at the log end (a leader that has not appended yet).
        self.epochs.truncate_from_end(log_end_offset + 1)

        start = state.log_start_offset if state else self.segments[0].base_offset
        log_start_offset = min(max(start, self.segments[0].base_offset), log_end_offset)
        self.epochs.truncate_from_start(log_start_offset)
        high_watermark = min(max(state.high_watermark if state else 0, log_start_offset), log_end_offset)
        # Recovered segments may have lost index entries of aborted transactions: replaying from
        # below them re-adds those.
        txn_index_from = self.segments[recover_from].base_offset if recover_from is not None else None
        rebuild_producer_state(self.producers, self.segments, log_end_offset, interval,
                               txn_index_from=txn_index_from, high_watermark=high_watermark)
        if recover_from is not None:
            # What recovery validated may still sit dirty in the page cache: make it durable so the
            # recovery point can move to the log end.
            for segment in self.segments[recover_from:]:
                segment.flush()
        recovery_point = log_end_offset
        self.epochs.write(sync=not fresh)
        checkpoint.write_state(
            directory, checkpoint.PartitionState(log_start_offset, recovery_point, high_watermark), sync=not fresh
        )
        checkpoint.clear_clean_shutdown(directory)
        # As the docstring says: durable now, so the first periodic flush has nothing to sync. A
        # brand-new log's files were not synced: its epoch file goes with its first durable records.
        for segment in self.segments:
            segment.mark_synced()
        self.epochs.mark_synced(deferred=fresh)
        return LoadedLog(self.segments, log_start_offset, log_end_offset, high_watermark, recovery_point)

    def _tidy_directory(self) -> list[int]:
        """Remove leftovers of interrupted operations; return the segment base offsets."""
        complete_interrupted_swaps(self.directory)
        names = os.listdir(self.directory)
        bases = sorted(b for n in names if (b := parse_offset_file_name(n, LOG_SUFFIX)) is not None)
        known = set(bases)
        for name in names:
            orphan_index = any(
                (b := parse_offset_file_name(name, suffix)) is not None and b not in known
                for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
            )
            if name.endswith((DELETED_SUFFIX, ".tmp", CLEANED_SUFFIX, SWAP_SUFFIX)) or orphan_index:
                (self.directory / name).unlink(missing_ok=True)
        return bases

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


def read_marker(segment: LogSegment, header: BatchHeader) -> TxnMarker | None:
    """The transaction marker of a control batch found by a header-only scan (markers are a few
    dozen bytes: one small read each)."""
    try:
        data = segment.read_bytes(header.position, header.size)
        return parse_txn_marker(data, dataclasses.replace(header, position=0))
    except (KafkaError, OSError):
        return None


def rebuild_producer_state(
    producers: ProducerStateManager,
    segments: Sequence[LogSegment],
    log_end_offset: int,
    index_interval_bytes: int,
    *,
    txn_index_from: int | None = None,
    high_watermark: int | None = None,
) -> None:
    """Newest snapshot at or below the log end, then replay the batch headers after it.

    Without any snapshot this replays the whole log (a full header scan). Used at open and after
    every truncation. With ``txn_index_from`` (crash recovery) the replay starts at or below that
    offset and every aborted transaction whose marker lies at or above it is put back into its
    segment's transaction index if missing. With ``high_watermark`` the replay starts at or below
    it too, so transactions completed by markers not yet below it are known (they hold the LSO)."""
    producers.delete_snapshots_above(log_end_offset)
    producers.clear()
    limit = min(x for x in (log_end_offset, txn_index_from, high_watermark) if x is not None)
    loaded = producers.load_latest_snapshot(limit)
    start = loaded if loaded is not None else segments[0].base_offset
    if start >= log_end_offset:
        return
    for segment in segments:
        if segment.next_offset <= start:
            continue
        first = segment.find_batch(start, index_interval_bytes) if segment.base_offset < start else None
        position = first.position if first is not None else 0
        for header in segment.iter_headers(position):
            if header.base_offset < start:
                continue
            marker = read_marker(segment, header) if header.is_control and header.producer_id >= 0 else None
            txn = producers.replay(header, header.max_timestamp if header.is_log_append_time else -1, marker)
            if txn is not None and txn.aborted and txn_index_from is not None and txn.last_offset >= txn_index_from:
                lso = producers.last_stable_offset_after(txn)
                segment.txn_index.add_if_missing(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
