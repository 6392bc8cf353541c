"""Sparse segment indexes in Kafka's on-disk format.

``.index``: pairs of (int32 offset relative to the segment base, int32 file position) of a batch:
the offset is that batch's LAST offset, the position its start, so a lookup of the largest entry
<= target gives a position at or before the batch containing the target.

``.timeindex``: pairs of (int64 timestamp, int32 relative offset): the segment's max timestamp so
far and the last offset of the batch that first reached it; entries only when the max grows.

Kafka preallocates these files and trims them on close; we append entries as they are made, so a
file always holds exactly the valid entries (Kafka's tools can read it at any time). Entries are
kept in memory (arrays, bisected) but loaded lazily: a broker with many old segments only pays for
the indexes it actually searches.
"""

from __future__ import annotations

import os
import struct
import threading
from array import array
from bisect import bisect_right
from pathlib import Path

from .files import fsync_path, pwrite_all


class SparseIndex:
    """Sorted (key, value) entries mirrored to a file of fixed-size big-endian entries."""

    entry: struct.Struct
    key_type: str
    value_type: str

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._keys = array(self.key_type)
        self._values = array(self.value_type)
        self._loaded = False
        self._fd: int | None = None
        # flush() runs in a worker thread while the event loop may close the handle at a
        # segment roll; the lock keeps fsync from ever meeting a closed (or reused) descriptor.
        self._fd_lock = threading.Lock()
        self._unsynced = True  # written since the last flush; a file just opened is synced once

    # --- loading ---

    def file_looks_valid(self) -> bool:
        """Cheap check at open: the file exists and holds whole entries only."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return False
        return size % self.entry.size == 0

    def load(self) -> None:
        """Read the file into memory (once). A torn trailing partial entry is dropped."""
        if self._loaded:
            return
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        usable = len(data) - len(data) % self.entry.size
        for key, value in self.entry.iter_unpack(data[:usable]):
            self._keys.append(key)
            self._values.append(value)
        self._loaded = True

    @property
    def loaded(self) -> bool:
        return self._loaded

    def __len__(self) -> int:
        self.load()
        return len(self._keys)

    def last_raw(self) -> tuple[int, int] | None:
        """The last entry, without loading the whole file when it is not loaded yet."""
        if self._loaded:
            return (self._keys[-1], self._values[-1]) if self._keys else None
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                size -= size % self.entry.size
                if size == 0:
                    return None
                f.seek(size - self.entry.size)
                key, value = self.entry.unpack(f.read(self.entry.size))
                return key, value
        except FileNotFoundError:
            return None

    # --- writing ---

    def _file(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def _append_raw(self, key: int, value: int) -> None:
        self.load()
        pwrite_all(self._file(), self.entry.pack(key, value), len(self._keys) * self.entry.size)
        self._unsynced = True
        self._keys.append(key)
        self._values.append(value)

    def _truncate_entries(self, count: int) -> None:
        self.load()
        if count >= len(self._keys):
            return
        del self._keys[count:]
        del self._values[count:]
        os.ftruncate(self._file(), count * self.entry.size)
        self._unsynced = True

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._keys = array(self.key_type)
        self._values = array(self.value_type)
        self._loaded = True
        self._unsynced = True
        with self._fd_lock:
            if self._fd is not None:
                os.ftruncate(self._fd, 0)
                return
        # No handle is kept: an empty index of a new (often idle) segment costs no descriptor
        # until its first entry; holding three per partition ran 10,000 partitions into the
        # usual open-files limit.
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))

    def flush(self) -> bool:
        """fsync the file if written since the last flush; True if it did."""
        if not self._unsynced:
            return False
        self._unsynced = False  # before the fsync: a racing write marks it again
        with self._fd_lock:
            if self._fd is not None:
                os.fsync(self._fd)
                return True
        fsync_path(self.path)
        return True

    def mark_synced(self) -> None:
        self._unsynced = False

    def close_file(self) -> None:
        """Release the write handle (inactive segments rarely write their index again)."""
        with self._fd_lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def unload(self) -> None:
        self._keys = array(self.key_type)
        self._values = array(self.value_type)
        self._loaded = False

    def rename(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = path

    # --- searching ---

    def _floor(self, key: int) -> int:
        """Slot of the largest entry with key <= ``key``, or -1."""
        self.load()
        return bisect_right(self._keys, key) - 1


class OffsetIndex(SparseIndex):
    entry = struct.Struct(">ii")
    key_type = "i"
    value_type = "i"

    def append(self, last_offset: int, position: int) -> None:
        self._append_raw(last_offset - self.base_offset, position)

    def lookup(self, offset: int) -> tuple[int, int] | None:
        """(absolute offset, position) of the largest entry with offset <= ``offset``."""
        slot = self._floor(offset - self.base_offset)
        if slot < 0:
            return None
        return self.base_offset + self._keys[slot], self._values[slot]

    def floor_position(self, position: int) -> int | None:
        """The largest indexed batch position <= ``position`` (positions grow with offsets)."""
        self.load()
        slot = bisect_right(self._values, position) - 1
        return self._values[slot] if slot >= 0 else None

    def last_entry(self) -> tuple[int, int] | None:
        raw = self.last_raw()
        return None if raw is None else (self.base_offset + raw[0], raw[1])

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset``."""
        self.load()
        self._truncate_entries(bisect_right(self._keys, offset - self.base_offset - 1))

    def sane(self, log_size: int) -> bool:
        self.load()
        keys, values = self._keys, self._values
        if any(keys[i] >= keys[i + 1] or values[i] >= values[i + 1] for i in range(len(keys) - 1)):
            return False
        return not keys or (keys[0] >= 0 and values[0] >= 0 and values[-1] < log_size)


class TimeIndex(SparseIndex):
    entry = struct.Struct(">qi")
    key_type = "q"
    value_type = "i"

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Append only when the timestamp grows (entries must be monotonic, as Kafka's are)."""
        self.load()
        if self._keys and (timestamp <= self._keys[-1] or offset - self.base_offset < self._values[-1]):
            return False
        if timestamp < 0:
            return False
        self._append_raw(timestamp, offset - self.base_offset)
        return True

    def lookup(self, timestamp: int) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the largest entry with timestamp <= ``timestamp``."""
        slot = self._floor(timestamp)
        if slot < 0:
            return None
        return self._keys[slot], self.base_offset + self._values[slot]

    def last_entry(self) -> tuple[int, int] | None:
        raw = self.last_raw()
        return None if raw is None else (raw[0], self.base_offset + raw[1])

    def truncate_to(self, offset: int) -> None:
        """Remove entries pointing at offsets >= ``offset``."""
        self.load()
        relative = offset - self.base_offset
        count = len(self._values)
        while count > 0 and self._values[count - 1] >= relative:
            count -= 1
        self._truncate_entries(count)

    def sane(self, next_offset: int | None = None) -> bool:
        self.load()
        keys, values = self._keys, self._values
        if any(keys[i] >= keys[i + 1] or values[i] > values[i + 1] for i in range(len(keys) - 1)):
            return False
        if not keys:
            return True
        if values[0] < 0:
            return False
        return next_offset is None or self.base_offset + values[-1] < next_offset
