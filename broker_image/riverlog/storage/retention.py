"""Retention: removing a log's oldest data, by time, by size or by moving its log start offset.

Whole segments go, and only ones lying entirely below the high watermark. A removed segment is
renamed ``*.deleted`` at once but its files stay open until ``file.delete.delay.ms`` has passed,
so fetches still streaming from it are unaffected; :func:`run_maintenance` unlinks them later.

The log is passed in as a :class:`RetainedLog`, the members of a :class:`~.log.Log` retention
needs (this module does not import log.py, which imports it). Some are the log's underscore
members: retention is the log's own business, done under its lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ..protocol.errors import ErrorCode, KafkaError
from .config import LogConfig
from .epoch_cache import LeaderEpochCache
from .producer_state import ProducerStateManager
from .segment import LogSegment

HIGH_WATERMARK_SENTINEL = -1  # DeleteRecords: "up to the high watermark"

SegmentPredicate = Callable[[LogSegment, "LogSegment | None"], bool]


class RetainedLog(Protocol):
    """What retention reads and changes in a log (:class:`~.log.Log` is one)."""

    directory: Path
    config: LogConfig
    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    epochs: LeaderEpochCache
    producers: ProducerStateManager
    _pending_deletion: list[tuple[LogSegment, int | None]]  # (segment, unlink due at)

    @property
    def lock(self) -> threading.RLock: ...

    @property
    def closed(self) -> bool: ...

    @property
    def active_segment(self) -> LogSegment: ...

    def size_bytes(self) -> int: ...

    def _check_open(self) -> None: ...

    def checkpoint_state(self) -> None: ...

    def _roll(self, new_base: int, now_ms: int) -> None: ...

    def _retire_segment(self, segment: LogSegment, delete_due: int | None) -> None: ...


def delete_records_before(log: RetainedLog, offset: int) -> int:
    """DeleteRecords: move the log start offset up to ``offset`` (-1: the high watermark)."""
    with log.lock:
        log._check_open()
        if offset == HIGH_WATERMARK_SENTINEL:
            offset = log.high_watermark
        if offset < 0 or offset > log.high_watermark:
            raise KafkaError(
                f"offset {offset} is beyond the high watermark {log.high_watermark}", ErrorCode.OFFSET_OUT_OF_RANGE
            )
        if offset > log.log_start_offset:
            advance_log_start(log, offset)
            delete_old_segments(log, lambda seg, nxt: nxt is not None and nxt.base_offset <= offset, None)
            log.checkpoint_state()
        return log.log_start_offset


def advance_log_start(log: RetainedLog, offset: int) -> None:
    log.log_start_offset = offset
    if log.epochs.truncate_from_start(offset):
        log.epochs.write()


def apply_retention(log: RetainedLog, now_ms: int) -> int:
    """Delete whole segments past retention.ms / retention.bytes, or below the log start offset.

    Only segments entirely below the high watermark go. If every segment is expired, the
    active one is rolled first (a log always keeps one segment). Returns segments removed."""
    with log.lock:
        log._check_open()
        config = log.config
        removed = 0
        if config.deletes and config.retention_ms >= 0:
            removed += delete_old_segments(
                log, lambda seg, _nxt: now_ms - seg.largest_timestamp() > config.retention_ms, now_ms
            )
        if config.deletes and config.retention_bytes >= 0:
            excess = [log.size_bytes() - config.retention_bytes]

            def over_size(seg: LogSegment, _nxt: LogSegment | None) -> bool:
                if excess[0] - seg.size < 0:
                    return False
                excess[0] -= seg.size
                return True

            if excess[0] > 0:
                removed += delete_old_segments(log, over_size, now_ms)
        start = log.log_start_offset
        removed += delete_old_segments(log, lambda _s, nxt: nxt is not None and nxt.base_offset <= start, now_ms)
        if removed:
            log.checkpoint_state()
        return removed


def delete_old_segments(log: RetainedLog, predicate: SegmentPredicate, now_ms: int | None) -> int:
    """Delete the oldest segments while ``predicate(segment, next segment)`` holds.

    With ``now_ms`` None (DeleteRecords has no clock) the files are unlinked
    file.delete.delay.ms after the next :func:`run_maintenance` instead."""
    deletable: list[LogSegment] = []
    for i, segment in enumerate(log.segments):
        following = log.segments[i + 1] if i + 1 < len(log.segments) else None
        upper = following.base_offset if following else log.log_end_offset
        if upper > log.high_watermark or (following is None and segment.size == 0):
            break
        if not predicate(segment, following):
            break
        deletable.append(segment)
    if not deletable:
        return 0
    if len(deletable) == len(log.segments):
        log._roll(log.log_end_offset, now_ms if now_ms is not None else log.active_segment.created_ms)
    for segment in deletable:
        log.segments.remove(segment)
        log._retire_segment(segment, None if now_ms is None else now_ms + log.config.file_delete_delay_ms)
    if log.segments[0].base_offset > log.log_start_offset:
        advance_log_start(log, log.segments[0].base_offset)
    return len(deletable)


def run_maintenance(log: RetainedLog, now_ms: int) -> None:
    """Periodic work: retention, time-based roll of an idle segment, delayed file deletion,
    expiry of idle producers."""
    with log.lock:
        if log.closed:
            return
        apply_retention(log, now_ms)
        active = log.active_segment
        if active.time_to_roll(now_ms, now_ms, log.config.roll_ms):
            log._roll(log.log_end_offset, now_ms)
        still_pending: list[tuple[LogSegment, int | None]] = []
        for segment, due in log._pending_deletion:
            if due is None:
                due = now_ms + log.config.file_delete_delay_ms
            if now_ms >= due:
                segment.delete_files()
            else:
                still_pending.append((segment, due))
        log._pending_deletion = still_pending
        log.producers.expire(now_ms, log.config.producer_id_expiration_ms)
