"""Timestamp lookups over a log's segments, for ListOffsets.

Plain functions over the segment list: the caller (:class:`~.log.Log`) holds its lock and has
checked that the log is open.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..protocol.record_batch import decode_records, read_header
from .segment import LogSegment

# (offset, timestamp, leader epoch) of a record
TimestampAndOffset = tuple[int, int, int]


def offset_for_timestamp(
    segments: Sequence[LogSegment],
    log_start_offset: int,
    index_interval_bytes: int,
    timestamp: int,
    *,
    max_offset: int | None = None,
) -> TimestampAndOffset | None:
    """(offset, timestamp, leader epoch) of the first record at or after ``timestamp``."""
    for segment in segments:
        if segment.max_timestamp < timestamp or segment.next_offset <= log_start_offset:
            continue
        found = search_segment(segment, log_start_offset, index_interval_bytes, timestamp)
        if found is not None:
            if max_offset is not None and found[0] >= max_offset:
                return None
            return found
    return None


def search_segment(
    segment: LogSegment, log_start_offset: int, index_interval_bytes: int, timestamp: int
) -> TimestampAndOffset | None:
    """The first record of ``segment`` at or above the log start with a timestamp >= ``timestamp``."""
    segment.ensure_indexes(index_interval_bytes)
    # Batches before the one that first reached the time index entry's timestamp all have
    # smaller timestamps, so the scan may start there.
    entry = segment.time_index.lookup(timestamp)
    from_offset = max(entry[1] if entry else segment.base_offset, log_start_offset)
    indexed = segment.offset_index.lookup(from_offset)
    for header in segment.iter_headers(indexed[1] if indexed else 0):
        if header.last_offset < log_start_offset or header.max_timestamp < timestamp:
            continue
        if header.is_log_append_time:
            return (
                max(header.base_offset, log_start_offset),
                header.max_timestamp,
                header.partition_leader_epoch,
            )
        data = segment.read_bytes(header.position, header.size)
        for record in decode_records(data, read_header(data)):
            if record.offset >= log_start_offset and record.timestamp >= timestamp:
                return record.offset, record.timestamp, header.partition_leader_epoch
    return None


def max_timestamp_offset(segments: Sequence[LogSegment], index_interval_bytes: int) -> TimestampAndOffset | None:
    """ListOffsets MAX_TIMESTAMP: (offset, timestamp, leader epoch) of the record with the largest
    timestamp (the first such record if several share it)."""
    best: LogSegment | None = None
    for segment in segments:
        if segment.max_timestamp >= 0 and (best is None or segment.max_timestamp > best.max_timestamp):
            best = segment
    if best is None:
        return None
    header = best.find_batch(best.offset_of_max_timestamp, index_interval_bytes)
    if header is None:
        return None
    epoch = header.partition_leader_epoch
    if not header.is_log_append_time:
        data = best.read_bytes(header.position, header.size)
        for record in decode_records(data, read_header(data)):
            if record.timestamp == header.max_timestamp:
                return record.offset, record.timestamp, epoch
    return header.base_offset, header.max_timestamp, epoch
