"""Small file helpers shared by the storage modules: names, atomic replace, positional I/O."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
# Log cleaner (cleaner.py): segments being written, segments committed but not yet in place, and
# the record of which old segments a committed swap replaces.
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SWAP_RANGE_SUFFIX = ".swap-range"


def offset_file_name(offset: int, suffix: str) -> str:
    """Kafka names segment files by their base offset, zero-padded to 20 digits."""
    return f"{offset:020d}{suffix}"


def parse_offset_file_name(name: str, suffix: str) -> int | None:
    if not name.endswith(suffix):
        return None
    stem = name[: -len(suffix)]
    if len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def fsync_dir(directory: Path) -> None:
    """Make renames, creations and unlinks in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_path(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, sync: bool) -> None:
    """Replace ``path`` with ``data`` so a crash leaves either the old or the new content.

    A unique temporary name lets a flush thread and the event loop write concurrently without
    clobbering each other's temporary file. Without ``sync`` the new content is not yet durable;
    callers fsync later (on flush) to keep the hot path free of fsyncs.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if sync:
        fsync_dir(path.parent)


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written


def pread_exact(fd: int, size: int, position: int) -> bytes:
    """Read up to ``size`` bytes at ``position``; shorter only at end of file."""
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.pread(fd, size, position)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
        position += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
