"""A segment's aborted transaction index, ``<base>.txnindex``, in Kafka's layout.

One entry per transaction aborted by a marker in this segment (big-endian, 34 bytes)::

    version int16 (0) | producer id int64 | first offset int64 | last offset int64
    | last stable offset int64

``first offset`` is the transaction's first data batch (possibly in an earlier segment), ``last
offset`` the abort marker's offset, ``last stable offset`` the partition's LSO right after the
marker was written. read_committed fetches hand the overlapping entries to the consumer, which
then drops the aborted producer's records from ``first offset`` until it meets the marker. The
same layout as Kafka's means ``kafka-dump-log`` can read the file.

Aborted transactions are rare, so the whole index lives in memory; the file is created with the
first entry (a segment without aborts has none, as in Kafka) and appended to, unsynced, like the
offset index: crash recovery rebuilds the entries of segments above the recovery point.
"""

from __future__ import annotations

import contextlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from .files import fsync_path

TXN_INDEX_SUFFIX = ".txnindex"
_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(_VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """The complete entries of a ``.txnindex`` file (a torn last entry or an unknown version ends it)."""
    entries: list[AbortedTxn] = []
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != _VERSION:
            break
        entries.append(AbortedTxn(pid, first, last, lso))
    return entries


class TransactionIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.entries = decode_entries(path.read_bytes())
        except FileNotFoundError:
            self.entries = []
        self._dirty = False

    def append(self, entry: AbortedTxn) -> None:
        with open(self.path, "ab") as f:
            f.write(entry.encode())
        self.entries.append(entry)
        self._dirty = True

    def add_if_missing(self, entry: AbortedTxn) -> None:
        """Recovery replays markers that may already be indexed: add only what is not."""
        if not any(e.producer_id == entry.producer_id and e.last_offset == entry.last_offset for e in self.entries):
            self.append(entry)

    def _rewrite(self) -> None:
        if self.entries:
            with open(self.path, "wb") as f:
                f.write(b"".join(e.encode() for e in self.entries))
            self._dirty = True
        else:
            self.path.unlink(missing_ok=True)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker lies at or after ``offset`` (the log was cut there)."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._rewrite()

    def replace(self, entries: list[AbortedTxn]) -> None:
        """Set the whole index (a compacted segment inherits the entries of those it replaced)."""
        self.entries = list(entries)
        self._rewrite()

    def overlapping(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [start_offset, end_offset)."""
        return [e for e in self.entries if e.last_offset >= start_offset and e.first_offset < end_offset]

    def flush(self) -> bool:
        """fsync the file if written since the last flush; True if it did."""
        if not self._dirty:
            return False
        self._dirty = False
        with contextlib.suppress(FileNotFoundError):
            fsync_path(self.path)
        return True

    def rename(self, new_path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
