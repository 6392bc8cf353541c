"""Durable storage of one Raft node of the metadata quorum, in ``__cluster_metadata-0/``.

Files (our own formats; Kafka's tools are not expected to read them):

``quorum-state``
    JSON ``{"epoch", "voted_for", "leader_id"}`` (Kafka keeps the same facts in a file of the same
    name). Replaced atomically: temporary file, fsync, rename, directory fsync.
``raft.log``
    The entry log: an append-only sequence of framed records, big-endian::

        length uint32 (of the payload) | crc uint32 (CRC-32C of the payload) |
        payload: offset int64 | epoch int64 | flags int8 (bit 0: control) | data

    ``truncate_to`` cuts the file; moving the log start (after a snapshot) rewrites the kept
    suffix into a new file that atomically replaces the old one. Compaction is rare (once per
    snapshot) and the metadata log is small, so one file is simpler than segments and still
    correct. A crash can leave a partial or damaged last record: ``load`` drops it and cuts the
    file there, since it was never fsynced and so no message ever depended on it.
``<20-digit end offset>-<epoch>.checkpoint``
    A snapshot (Kafka's snapshot file name), ``crc uint32 | data``, written atomically. Older
    checkpoints are deleted once a newer one is durable.

Leftover ``*.tmp`` files come from a crash in the middle of an atomic write and are deleted.
"""

from __future__ import annotations

import json
import os
import re
import struct
from pathlib import Path

import crc32c

from ...storage.files import atomic_write, fsync_dir, pwrite_all
from ..raft import Entry, HardState, Ready, Snapshot, Storage

METADATA_DIR_NAME = "__cluster_metadata-0"
QUORUM_STATE_NAME = "quorum-state"
LOG_NAME = "raft.log"
CHECKPOINT_SUFFIX = ".checkpoint"
TMP_SUFFIX = ".tmp"

_FRAME = struct.Struct(">II")
_ENTRY_HEAD = struct.Struct(">qqb")
_CRC = struct.Struct(">I")
_CHECKPOINT_RE = re.compile(r"^(\d{20})-(\d+)\.checkpoint$")
_CONTROL = 0x01
# A length above this cannot be a real record: treat it as garbage of a torn write instead of
# trying to read gigabytes.
_MAX_RECORD = 1 << 30


class StorageError(Exception):
    """The files are damaged beyond a torn tail, or a Ready does not fit the stored log (a bug)."""


def checkpoint_name(end_offset: int, epoch: int) -> str:
    return f"{end_offset:020d}-{epoch}{CHECKPOINT_SUFFIX}"


def encode_entry(entry: Entry) -> bytes:
    payload = _ENTRY_HEAD.pack(entry.offset, entry.epoch, _CONTROL if entry.control else 0) + entry.data
    return _FRAME.pack(len(payload), crc32c.crc32c(payload)) + payload


class QuorumStorage:
    """The on-disk state of one node. Call :meth:`load` once, then :meth:`persist` per Ready.

    Not thread-safe: the driver persists one Ready at a time (from a worker thread).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._fd: int | None = None
        # File position of each stored entry (entry ``_first + i`` starts at ``_positions[i]``),
        # so truncation and compaction find their cut without reading the file.
        self._positions: list[int] = []
        self._first = 0
        self._size = 0

    @classmethod
    def in_log_dir(cls, log_dir: Path) -> QuorumStorage:
        return cls(Path(log_dir) / METADATA_DIR_NAME)

    @property
    def log_path(self) -> Path:
        return self.directory / LOG_NAME

    @property
    def stored_end(self) -> int | None:
        """End offset of the stored log, or None when it holds no entries."""
        return self._first + len(self._positions) if self._positions else None

    # Start-up ----------------------------------------------------------------------------

    def load(self) -> Storage:
        """Read everything a previous life persisted, repairing what a crash can leave behind."""
        created = not self.directory.exists()
        self.directory.mkdir(parents=True, exist_ok=True)
        if created:
            fsync_dir(self.directory.parent)
        for leftover in self.directory.glob("*" + TMP_SUFFIX):
            leftover.unlink()
        hard_state = self._load_hard_state()
        snapshot = self._load_snapshot()
        entries = self._load_log()
        return Storage(hard_state=hard_state, snapshot=snapshot, entries=entries)

    def _load_hard_state(self) -> HardState:
        path = self.directory / QUORUM_STATE_NAME
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return HardState()
        try:
            obj = json.loads(raw)
            return HardState(int(obj["epoch"]), _opt_int(obj.get("voted_for")), _opt_int(obj.get("leader_id")))
        except (ValueError, KeyError, TypeError) as e:
            # Written atomically, so damage here is not a torn write: refuse to guess a vote.
            raise StorageError(f"{path}: unreadable quorum state: {e}") from e

    def _load_snapshot(self) -> Snapshot | None:
        found: list[tuple[int, int, Path]] = []
        for path in self.directory.iterdir():
            m = _CHECKPOINT_RE.match(path.name)
            if m:
                found.append((int(m.group(1)), int(m.group(2)), path))
        if not found:
            return None
        found.sort()
        end_offset, epoch, path = found[-1]
        raw = path.read_bytes()
        if len(raw) < _CRC.size or _CRC.unpack_from(raw)[0] != crc32c.crc32c(raw[_CRC.size :]):
            # Checkpoints are renamed into place only once complete, so this is real damage and
            # the log may already be compacted past any older one.
            raise StorageError(f"{path}: checkpoint fails its CRC")
        # Older checkpoints survive only a crash between writing a new one and deleting them.
        for _, _, old in found[:-1]:
            old.unlink()
        if len(found) > 1:
            fsync_dir(self.directory)
        return Snapshot(end_offset, epoch, raw[_CRC.size :])

    def _load_log(self) -> list[Entry]:
        path = self.log_path
        existed = path.exists()
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if not existed:
            fsync_dir(self.directory)
        with open(path, "rb") as f:
            raw = f.read()
        entries: list[Entry] = []
        positions: list[int] = []
        pos = 0
        while pos + _FRAME.size <= len(raw):
            length, crc = _FRAME.unpack_from(raw, pos)
            start = pos + _FRAME.size
            if length < _ENTRY_HEAD.size or length > _MAX_RECORD or start + length > len(raw):
                break
            payload = raw[start : start + length]
            if crc32c.crc32c(payload) != crc:
                break
            offset, epoch, flags = _ENTRY_HEAD.unpack_from(payload)
            # Contiguous offsets and non-decreasing epochs hold for everything that was fsynced
            # (truncations are fsynced before the appends that follow them), so a record breaking
            # them is debris of an unsynced write past a cut: the tail from it on is dropped.
            if entries and (offset != entries[-1].offset + 1 or epoch < entries[-1].epoch):
                break
            entries.append(Entry(offset, epoch, payload[_ENTRY_HEAD.size :], bool(flags & _CONTROL)))
            positions.append(pos)
            pos = start + length
        if pos < len(raw):
            # Cut the torn tail so new records are appended right after the last good one.
            os.ftruncate(self._fd, pos)
            os.fsync(self._fd)
        self._positions = positions
        self._first = entries[0].offset if entries else 0
        self._size = pos
        return entries

    # Persisting a Ready ------------------------------------------------------------------

    def persist(self, ready: Ready) -> None:
        """Make the durable parts of ``ready`` durable, in the order ``Ready`` documents; when this
        returns, the Ready's messages may be sent."""
        if self._fd is None:
            raise StorageError("load() must be called before persist()")
        if ready.hard_state is not None:
            self.write_hard_state(ready.hard_state)
        if ready.snapshot is not None:
            self.write_snapshot(ready.snapshot)
        if ready.truncate_to is not None:
            self.truncate_to(ready.truncate_to)
        if ready.log_start is not None:
            self.set_log_start(ready.log_start)
        if ready.entries:
            self.append(ready.entries)

    def write_hard_state(self, hs: HardState) -> None:
        data = json.dumps({"epoch": hs.epoch, "voted_for": hs.voted_for, "leader_id": hs.leader_id}).encode()
        atomic_write(self.directory / QUORUM_STATE_NAME, data, sync=True)

    def write_snapshot(self, snap: Snapshot) -> None:
        name = checkpoint_name(snap.end_offset, snap.epoch)
        atomic_write(self.directory / name, _CRC.pack(crc32c.crc32c(snap.data)) + snap.data, sync=True)
        removed = False
        for path in self.directory.iterdir():
            m = _CHECKPOINT_RE.match(path.name)
            if m and path.name != name and int(m.group(1)) <= snap.end_offset:
                path.unlink()
                removed = True
        if removed:
            fsync_dir(self.directory)

    def truncate_to(self, offset: int) -> None:
        """Delete stored entries at offsets >= ``offset``."""
        fd = self._require_fd()
        end = self.stored_end
        if end is None or offset >= end:
            return
        keep = max(0, offset - self._first)
        cut = self._positions[keep] if keep < len(self._positions) else self._size
        os.ftruncate(fd, cut)
        # fsync now, not with the appends that follow: otherwise a crash could leave new records
        # written but the cut not, i.e. new entries followed by stale ones of an older epoch.
        os.fsync(fd)
        del self._positions[keep:]
        self._size = cut

    def set_log_start(self, offset: int) -> None:
        """Delete stored entries below ``offset`` (they are covered by a durable snapshot)."""
        fd = self._require_fd()
        end = self.stored_end
        if end is None or offset <= self._first:
            return
        if offset >= end:
            os.ftruncate(fd, 0)
            os.fsync(fd)
            self._positions = []
            self._size = 0
            return
        # Rewrite the kept suffix into a new file and rename it over the old one: a crash leaves
        # either the whole old log (the core drops what the snapshot covers) or the new one.
        cut = self._positions[offset - self._first]
        tail = os.pread(fd, self._size - cut, cut)
        atomic_write(self.log_path, tail, sync=True)
        os.close(fd)
        self._fd = os.open(self.log_path, os.O_RDWR)
        self._positions = [p - cut for p in self._positions[offset - self._first :]]
        self._first = offset
        self._size = len(tail)

    def append(self, entries: list[Entry]) -> None:
        fd = self._require_fd()
        end = self.stored_end
        if end is not None and entries[0].offset != end:
            raise StorageError(f"append at {entries[0].offset} but the stored log ends at {end}")
        buf = bytearray()
        positions = []
        prev = entries[0].offset - 1
        for entry in entries:
            if entry.offset != prev + 1:
                raise StorageError(f"entries to append are not contiguous at {entry.offset}")
            prev = entry.offset
            positions.append(self._size + len(buf))
            buf += encode_entry(entry)
        pwrite_all(fd, buf, self._size)
        os.fsync(fd)
        if not self._positions:
            self._first = entries[0].offset
        self._positions.extend(positions)
        self._size += len(buf)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # Helpers -----------------------------------------------------------------------------

    def _require_fd(self) -> int:
        if self._fd is None:
            raise StorageError("storage is not loaded (or closed)")
        return self._fd


def _opt_int(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int):
        raise TypeError(f"expected an int or null, got {value!r}")
    return value
