"""The compaction swap: old segments out, the log cleaner's cleaned segment in, crash-safely.

The cleaner (cleaner.py) writes complete, fsynced ``<base>.*.cleaned`` files without holding the
log's lock; :func:`replace_segments` then swaps them in under the lock with a few renames. A crash
at any step leaves files that :func:`complete_interrupted_swaps` finishes (or, for an uncommitted
swap, the log loader's tidy-up discards) the next time the log is opened.

Files of a swap in progress, for a cleaned segment with base offset ``base``::

    <base>.swap-range                 the upper end of the replaced range, written first
    <base>.{log,index,timeindex}.cleaned   the cleaner's output, not yet committed
    <base>.{log,index,timeindex}.swap      committed (renaming the .log one is the commit)

The log is passed in as a :class:`SwappableLog`, the few members of a :class:`~.log.Log` the
swap needs (this module does not import log.py, which imports it).
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Protocol

from .config import LogConfig
from .files import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_RANGE_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    atomic_write,
    fsync_dir,
    offset_file_name,
    parse_offset_file_name,
)
from .segment import LogSegment


class SwappableLog(Protocol):
    """What the swap reads and changes in a log (:class:`~.log.Log` is one)."""

    directory: Path
    config: LogConfig
    segments: list[LogSegment]
    truncations: int  # bumped by every truncation

    @property
    def lock(self) -> threading.RLock: ...

    @property
    def closed(self) -> bool: ...

    def _retire_segment(self, segment: LogSegment, delete_due: int | None) -> None: ...


def replace_segments(
    log: SwappableLog, old: list[LogSegment], upper: int, now_ms: int, *, truncations: int | None = None
) -> bool:
    """Swap consecutive inactive segments ``old`` (covering [old[0].base, upper)) of ``log`` for the
    log cleaner's complete, fsynced ``<base>.*.cleaned`` files, base = old[0].base_offset.

    Returns False, changing nothing, if the log moved on meanwhile (closed, truncated since
    ``truncations`` was read, or a segment removed by retention): the caller then discards
    its files.

    Crash safety. ``<base>.swap-range`` (holding ``upper``) is written first; renaming the
    ``.cleaned`` log to ``.swap`` commits; the old segments become ``*.deleted`` (their open
    files keep serving in-flight fetches until file.delete.delay.ms); the ``.swap`` files
    take their final names; the range file goes. Open finishes a committed swap from the
    range file (:func:`complete_interrupted_swaps`) and removes an uncommitted one's ``.cleaned``
    files.
    """
    if not old:
        return False
    directory = log.directory
    base = old[0].base_offset
    # Written (and fsynced) before taking the lock, so appends do not wait for it; alone,
    # without a ``.log.swap``, it means nothing and open removes it.
    range_path = directory / offset_file_name(base, SWAP_RANGE_SUFFIX)
    atomic_write(range_path, f"{upper}\n".encode(), sync=True)
    with log.lock:
        if log.closed or (truncations is not None and truncations != log.truncations):
            range_path.unlink(missing_ok=True)
            return False
        start = next((i for i, s in enumerate(log.segments) if s is old[0]), None)
        end = None if start is None else start + len(old)
        if (
            start is None
            or end is None
            or end >= len(log.segments)  # the active segment is never swapped
            or any(a is not b for a, b in zip(log.segments[start:end], old, strict=True))
            or log.segments[end].base_offset != upper
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
            log._retire_segment(segment, now_ms + log.config.file_delete_delay_ms)
        for suffix in suffixes:
            name = offset_file_name(base, suffix)
            os.replace(directory / (name + SWAP_SUFFIX), directory / name)
        fsync_dir(directory)
        range_path.unlink(missing_ok=True)
        cleaned = LogSegment.open(directory, base, now_ms=now_ms)
        cleaned.next_offset = upper
        cleaned.inactive = True
        # The cleaner keeps every transaction's data and markers (removing aborted ones is not
        # done yet), so the cleaned segment inherits the aborted transaction entries unchanged.
        # Not crash-safe: a crash right here loses them (the segment is below the recovery point).
        cleaned.txn_index.replace([e for segment in old for e in segment.txn_index.entries])
        log.segments[start:end] = [cleaned]
        return True


def complete_interrupted_swaps(directory: Path) -> None:
    """Finish a compaction swap that a crash interrupted (see :func:`replace_segments`).

    ``<base>.log.swap`` beside ``<base>.swap-range`` means the swap was committed: the old
    segments with base offsets in [base, upper) go and the ``.swap`` files take their names.
    Without the ``.log.swap`` the swap either never committed (``.cleaned`` files, removed by
    the tidy-up) or already completed; either way only the range file is left to remove.
    """
    names = os.listdir(directory)
    finished = False
    for name in names:
        base = parse_offset_file_name(name, SWAP_RANGE_SUFFIX)
        if base is None:
            continue
        swap_log = directory / (offset_file_name(base, LOG_SUFFIX) + SWAP_SUFFIX)
        try:
            upper: int | None = int((directory / name).read_text().strip())
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
