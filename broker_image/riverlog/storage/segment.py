"""One log segment: ``<base>.log`` plus its ``.index``, ``.timeindex`` and (only once a transaction
was aborted in it) ``.txnindex`` (txn_index.py).

The segment file is written with ``pwrite`` at explicit positions and read with ``pread`` (or
``sendfile`` by the server through a :class:`FileRegion`), so nobody depends on the shared file
position and the server may stream a region while we append behind it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from io import FileIO
from pathlib import Path

from ..protocol.errors import KafkaError
from ..protocol.record_batch import (
    HEADER_SIZE,
    INT32_MAX,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    read_header,
    validate_batch,
)
from .files import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    offset_file_name,
    pread_exact,
    pwrite_all,
)
from .index import OffsetIndex, TimeIndex
from .txn_index import TXN_INDEX_SUFFIX, TransactionIndex

# Header-only scans (offset lookups) cover about one index interval: small reads suffice.
HEADER_SCAN_CHUNK = 16 * 1024
# Recovery reads whole batches to check CRCs: bigger reads mean fewer syscalls.
RECOVERY_CHUNK = 1024 * 1024

# (position within the appended bytes, size, last offset, max timestamp) of one appended batch.
AppendedBatch = tuple[int, int, int, int]


class LogSegment:
    def __init__(
        self, directory: Path, base_offset: int, file: FileIO, *, created_ms: int, suffix: str = ""
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = directory / (offset_file_name(base_offset, LOG_SUFFIX) + suffix)
        self.file = file
        self.fd = file.fileno()
        self.size = os.fstat(self.fd).st_size
        self.offset_index = OffsetIndex(directory / (offset_file_name(base_offset, INDEX_SUFFIX) + suffix), base_offset)
        self.time_index = TimeIndex(
            directory / (offset_file_name(base_offset, TIME_INDEX_SUFFIX) + suffix), base_offset
        )
        self.txn_index = TransactionIndex(directory / (offset_file_name(base_offset, TXN_INDEX_SUFFIX) + suffix))
        # One past the last offset stored here; exact for the active segment, for older segments
        # the log sets it to the next segment's base offset (equal unless there are gaps).
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp: int | None = None
        self.created_ms = created_ms
        self.bytes_since_last_index_entry = 0
        self.indexes_checked = False
        self.inactive = False  # rolled: no more appends, its time index ends with the final max
        self.deleted = False
        # Written since the last fsync (set after each write, cleared before each fsync); a
        # segment just opened or created is synced once.
        self._unsynced = True

    # --- life cycle ---

    @classmethod
    def create(cls, directory: Path, base_offset: int, *, now_ms: int, suffix: str = "") -> LogSegment:
        """A new empty segment (any leftover files with the same base offset are emptied).

        ``suffix`` is appended to all three file names: the log cleaner builds its segments as
        ``<base>.log.cleaned`` etc. beside the live ones, and renames them in when complete."""
        path = directory / (offset_file_name(base_offset, LOG_SUFFIX) + suffix)
        file = open(path, "w+b", buffering=0)  # noqa: SIM115 - owned by the segment until close()
        segment = cls(directory, base_offset, file, created_ms=now_ms, suffix=suffix)
        segment.offset_index.reset()
        segment.time_index.reset()
        segment.txn_index.replace([])
        segment.indexes_checked = True
        return segment

    @classmethod
    def open(cls, directory: Path, base_offset: int, *, now_ms: int) -> LogSegment:
        """An existing segment; nothing is scanned (the log decides whether to trust or recover)."""
        path = directory / offset_file_name(base_offset, LOG_SUFFIX)
        file = open(path, "r+b", buffering=0)  # noqa: SIM115 - owned by the segment until close()
        segment = cls(directory, base_offset, file, created_ms=now_ms)
        last_time = segment.time_index.last_entry()
        if last_time is not None:
            segment.max_timestamp, segment.offset_of_max_timestamp = last_time
        return segment

    def indexes_look_valid(self) -> bool:
        return self.offset_index.file_looks_valid() and self.time_index.file_looks_valid()

    def ensure_indexes(self, index_interval: int) -> None:
        """Load the indexes before a search, rebuilding them if they fail a sanity check."""
        if self.indexes_checked:
            return
        self.offset_index.load()
        self.time_index.load()
        if not (self.offset_index.sane(self.size) and self.time_index.sane()):
            self.rebuild_indexes(index_interval)
        self.indexes_checked = True

    def flush(self) -> bool:
        """fsync what was written since the last flush (file and indexes); True if anything was."""
        synced = self._unsynced
        if synced:
            # Cleared before the fsync: a write racing with it marks the segment again.
            self._unsynced = False
            os.fsync(self.fd)
        synced = self.offset_index.flush() or synced
        synced = self.time_index.flush() or synced
        return self.txn_index.flush() or synced

    def mark_synced(self) -> None:
        """The log loader made everything durable (or, for a brand-new log, nothing needs to be)."""
        self._unsynced = False
        self.offset_index.mark_synced()
        self.time_index.mark_synced()

    def on_become_inactive(self) -> None:
        """At roll or close: record the final max timestamp so a reopen finds it in the time index."""
        self.inactive = True
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.close_file()
        self.time_index.close_file()

    def close(self) -> None:
        self.offset_index.close_file()
        self.time_index.close_file()
        self.file.close()

    def mark_deleted(self) -> None:
        """Rename the files ``*.deleted``: the open file object keeps serving in-flight responses."""
        self.deleted = True
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            with contextlib.suppress(FileNotFoundError):
                os.replace(path, path.with_name(path.name + DELETED_SUFFIX))
        self.log_path = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        self.offset_index.path = self.offset_index.path.with_name(self.offset_index.path.name + DELETED_SUFFIX)
        self.time_index.path = self.time_index.path.with_name(self.time_index.path.name + DELETED_SUFFIX)
        self.txn_index.rename(self.txn_index.path.with_name(self.txn_index.path.name + DELETED_SUFFIX))
        self.offset_index.close_file()
        self.time_index.close_file()
        self.offset_index.unload()
        self.time_index.unload()

    def delete_files(self) -> None:
        self.close()
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            path.unlink(missing_ok=True)
        self.txn_index.delete()

    # --- properties used by roll and retention ---

    def largest_timestamp(self) -> int:
        """Kafka's rule: the max record timestamp, or the file's mtime when there are none."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.fstat(self.fd).st_mtime * 1000)

    def index_full(self, segment_index_bytes: int) -> bool:
        # Only the active segment asks, and its indexes are always loaded.
        return (
            len(self.offset_index) >= segment_index_bytes // OffsetIndex.entry.size
            or len(self.time_index) >= segment_index_bytes // TimeIndex.entry.size
        )

    def fits_offset(self, offset: int) -> bool:
        """Index entries store offsets relative to the base as int32."""
        return 0 <= offset - self.base_offset <= INT32_MAX

    def time_to_roll(self, now_ms: int, incoming_max_timestamp: int, segment_ms: int) -> bool:
        """Kafka's segment.ms rule: time measured in record timestamps from the segment's first
        batch, falling back to wall-clock age when records carry no timestamps."""
        if self.size == 0:
            return False
        if self.first_batch_timestamp is not None and self.first_batch_timestamp >= 0:
            waited = incoming_max_timestamp - self.first_batch_timestamp
        else:
            waited = now_ms - self.created_ms
        return waited > segment_ms

    # --- appending ---

    def append(self, data: memoryview | bytes, batches: list[AppendedBatch], index_interval: int) -> None:
        """Write already validated batches at the end and index them sparsely, as Kafka does."""
        start = self.size
        try:
            pwrite_all(self.fd, data, start)
        finally:
            self._unsynced = True
        self._index_batches(start, batches, index_interval)
        self.size = start + len(data)

    def _index_batches(self, start: int, batches: list[AppendedBatch], index_interval: int) -> None:
        for rel_pos, size, last_offset, max_timestamp in batches:
            if self.first_batch_timestamp is None:
                self.first_batch_timestamp = max_timestamp
            if max_timestamp > self.max_timestamp:
                self.max_timestamp = max_timestamp
                self.offset_of_max_timestamp = last_offset
            if self.bytes_since_last_index_entry > index_interval:
                self.offset_index.append(last_offset, start + rel_pos)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += size
            self.next_offset = last_offset + 1

    # --- scanning ---

    def iter_headers(self, start: int = 0, end: int | None = None) -> Iterator[BatchHeader]:
        """Batch headers from ``start`` (a batch boundary) on; reads headers only, skipping bodies.

        Stops quietly at a header that cannot be a batch or a batch that runs past ``end``:
        trusted segments never have one, and recovery uses :meth:`iter_valid` instead.
        """
        end = self.size if end is None else end
        pos = start
        buf = b""
        buf_pos = start
        while end - pos >= HEADER_SIZE:
            rel = pos - buf_pos
            if rel < 0 or len(buf) - rel < HEADER_SIZE:
                buf = os.pread(self.fd, min(HEADER_SCAN_CHUNK, end - pos), pos)
                buf_pos = pos
                rel = 0
                if len(buf) < HEADER_SIZE:
                    return
            header = read_header(buf, rel, position=pos)
            if header.batch_length < MIN_BATCH_LENGTH or header.end > end:
                return
            yield header
            pos = header.end

    def iter_valid(self, start: int = 0) -> Iterator[BatchHeader]:
        """Batches from ``start`` that pass full validation (framing, magic, CRC, counts).

        Stops at the first batch that does not: everything from there on is a torn or corrupt
        tail. Offsets must also increase and fit the segment's relative-offset range.
        """
        pos = start
        end = os.fstat(self.fd).st_size
        buf = b""
        buf_pos = start
        expected = self.base_offset
        while end - pos >= LOG_OVERHEAD:
            rel = pos - buf_pos
            if rel < 0 or len(buf) - rel < HEADER_SIZE:
                buf = pread_exact(self.fd, min(RECOVERY_CHUNK, end - pos), pos)
                buf_pos, rel = pos, 0
            if len(buf) - rel < HEADER_SIZE:
                return
            header = read_header(buf, rel)
            if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > end:
                return
            if len(buf) - rel < header.size:
                buf = pread_exact(self.fd, max(min(RECOVERY_CHUNK, end - pos), header.size), pos)
                buf_pos, rel = pos, 0
                header = read_header(buf, 0)
            try:
                validate_batch(buf, header, compacted=True)
            except KafkaError:
                return
            if header.base_offset < expected or not self.fits_offset(header.last_offset):
                return
            expected = header.next_offset
            yield read_header(buf, rel, position=pos)
            pos += header.size

    def read_bytes(self, position: int, size: int) -> bytes:
        return pread_exact(self.fd, size, position)

    def find_batch(self, offset: int, index_interval: int) -> BatchHeader | None:
        """The first batch whose last offset is >= ``offset`` (the one containing it, if any)."""
        self.ensure_indexes(index_interval)
        entry = self.offset_index.lookup(offset)
        for header in self.iter_headers(entry[1] if entry else 0):
            if header.last_offset >= offset:
                return header
        return None

    def position_below(self, max_offset: int, index_interval: int) -> int:
        """End position of the batches lying entirely below ``max_offset``."""
        if max_offset >= self.next_offset:
            return self.size
        header = self.find_batch(max_offset, index_interval)
        return self.size if header is None else header.position

    def boundary_at_or_before(self, limit: int, start: int) -> int:
        """The largest batch boundary in [start, limit] (``start`` must be one)."""
        floor = self.offset_index.floor_position(limit)
        pos = floor if floor is not None and floor > start else start
        for header in self.iter_headers(pos):
            if header.end > limit:
                break
            pos = header.end
        return pos

    # --- rebuilding and truncating ---

    def recover(self, index_interval: int, on_batch: Callable[[BatchHeader], None]) -> int:
        """Validate every batch, cut the file at the first invalid one, rebuild both indexes.

        Returns the number of bytes truncated. ``on_batch`` sees each valid batch (producer state
        and leader epochs are rebuilt from them).
        """
        self._reset_state()
        valid_end = 0
        batches: list[AppendedBatch] = []
        for header in self.iter_valid(0):
            batches.append((header.position, header.size, header.last_offset, header.max_timestamp))
            if len(batches) >= 1024:
                self._index_batches(0, batches, index_interval)
                batches.clear()
            on_batch(header)
            valid_end = header.end
        self._index_batches(0, batches, index_interval)
        original = os.fstat(self.fd).st_size
        if original > valid_end:
            os.ftruncate(self.fd, valid_end)
            self._unsynced = True
        self.size = valid_end
        self.indexes_checked = True
        # Aborts whose marker was cut off go; the log loader re-adds any the crash lost.
        self.txn_index.truncate_to(self.next_offset)
        return original - valid_end

    def rebuild_indexes(self, index_interval: int) -> None:
        """Rebuild from batch headers only (segments below the recovery point are trusted)."""
        self._reset_state()
        batches: list[AppendedBatch] = []
        for header in self.iter_headers(0):
            batches.append((header.position, header.size, header.last_offset, header.max_timestamp))
            if len(batches) >= 1024:  # bounded memory however many batches the segment holds
                self._index_batches(0, batches, index_interval)
                batches.clear()
        self._index_batches(0, batches, index_interval)
        self.indexes_checked = True
        if self.inactive:
            self.on_become_inactive()

    def _reset_state(self) -> None:
        self.offset_index.reset()
        self.time_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = None
        self.bytes_since_last_index_entry = 0

    def load_tail_state(self, index_interval: int) -> bool:
        """Derive next offset, max timestamp and index bookkeeping by scanning after the last index
        entries (a clean open of the active segment). False if the file does not end exactly at a
        batch boundary, in which case the caller recovers the segment instead."""
        self.ensure_indexes(index_interval)
        last_index = self.offset_index.lookup(2**63 - 1)
        last_time = self.time_index.lookup(2**63 - 1)
        start = last_index[1] if last_index else 0
        if last_time is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last_time
            at = self.offset_index.lookup(last_time[1])
            start = min(start, at[1] if at else 0)
        else:
            self.max_timestamp, self.offset_of_max_timestamp = -1, -1
        end = start
        next_offset = self.base_offset
        for header in self.iter_headers(start):
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            next_offset = header.next_offset
            end = header.end
        if end != self.size:
            return False
        self.next_offset = next_offset
        self.bytes_since_last_index_entry = self.size - (last_index[1] if last_index else 0)
        first = self.first_header()
        self.first_batch_timestamp = None if first is None else first.max_timestamp
        return True

    def first_header(self) -> BatchHeader | None:
        return next(self.iter_headers(0), None)

    def truncate_to(self, offset: int, index_interval: int) -> bool:
        """Remove the batch containing ``offset`` and everything after; True if anything went."""
        header = self.find_batch(offset, index_interval)
        if header is None:
            return False
        os.ftruncate(self.fd, header.position)
        self._unsynced = True
        self.size = header.position
        self.offset_index.truncate_to(header.base_offset)
        self.time_index.truncate_to(header.base_offset)
        self.txn_index.truncate_to(header.base_offset)
        if not self.load_tail_state(index_interval):
            self.recover(index_interval, lambda _h: None)
        return True
