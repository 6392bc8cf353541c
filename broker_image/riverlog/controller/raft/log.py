"""The in-memory Raft log: entries above the log start, an epoch cache, and what is unpersisted.

The log answers the questions the protocol asks (``end_offset_for_epoch`` for KRaft's fetch
validation and diverging-epoch truncation, ``epoch_at`` for vote comparisons) and keeps track of
what changed since the driver last persisted, so a ``Ready`` can say exactly how the stored log
must change: truncate, move the log start, append. It never copies the whole log.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from .types import Entry, OffsetAndEpoch, Snapshot


class LogChanges:
    """How the stored log must change; see ``Ready`` for the order the driver applies them in."""

    __slots__ = ("entries", "log_start", "truncate_to")

    def __init__(self, truncate_to: int | None, log_start: int | None, entries: list[Entry]) -> None:
        self.truncate_to = truncate_to
        self.log_start = log_start
        self.entries = entries


class RaftLog:
    def __init__(self, snapshot: Snapshot | None, stored: Iterable[Entry]) -> None:
        entries = list(stored)
        start = snapshot.end_offset if snapshot is not None else 0
        prev_epoch = snapshot.epoch if snapshot is not None else 0
        stored_start = entries[0].offset if entries else start
        stored_end = entries[-1].offset + 1 if entries else start
        if entries:
            first = entries[0].offset
            for i, entry in enumerate(entries):
                if entry.offset != first + i:
                    raise ValueError(f"stored log is not contiguous at offset {entry.offset}")
            if snapshot is None:
                if first != 0:
                    raise ValueError(f"stored log starts at {first} but there is no snapshot")
            elif first > start:
                raise ValueError(f"stored log starts at {first}, after the snapshot end {start}")
            elif first < start:
                # The snapshot was written and the crash came before the log was compacted or
                # truncated. Keep the suffix only if it continues the snapshot (same rule as
                # installing a snapshot); otherwise it was about to be discarded as divergent.
                last = entries[start - first - 1] if start - first - 1 < len(entries) else None
                entries = entries[start - first :] if last is not None and last.epoch == snapshot.epoch else []
        self._entries: list[Entry] = entries
        self.start = start  # offset of _entries[0]
        self._prev_epoch = prev_epoch  # epoch of the entry at start - 1 (0 if none)
        self._rebuild_epochs()
        # Persistence bookkeeping: the driver's stored log ends at _stable_end and starts at
        # _reported_start; entries at _unstable_from and above are new since the last Ready.
        self._stable_end = stored_end
        # With a snapshot and no stored entries, the driver's (empty) log may still start below
        # the snapshot (a crash came between writing the snapshot and moving the log start):
        # the first Ready states the log start.
        self._reported_start = stored_start if stored_end > stored_start or snapshot is None else -1
        self._unstable_from: int | None = None
        if not self._entries and stored_end > stored_start:
            # Stored entries were all dropped above: the first Ready deletes them (truncate_to)
            # and moves the stored log start to the snapshot end (log_start).
            self._unstable_from = stored_start
        elif stored_start < self.start:
            self._stable_end = self.end  # a kept suffix: the first Ready only moves the log start

    # Queries -----------------------------------------------------------------------------

    @property
    def end(self) -> int:
        """Log end offset (exclusive)."""
        return self.start + len(self._entries)

    @property
    def last_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else self._prev_epoch

    @property
    def prev_epoch(self) -> int:
        """Epoch of the entry just below the log start (the snapshot's epoch)."""
        return self._prev_epoch

    def epoch_at(self, offset: int) -> int | None:
        """Epoch of the entry at ``offset``, or None when it is compacted away or not written."""
        if offset == self.start - 1:
            return self._prev_epoch
        if offset < self.start or offset >= self.end:
            return None
        return self._entries[offset - self.start].epoch

    def entry(self, offset: int) -> Entry:
        return self._entries[offset - self.start]

    def slice(self, start: int, end: int) -> list[Entry]:
        return self._entries[start - self.start : end - self.start]

    def read(self, offset: int, max_bytes: int, max_entries: int) -> tuple[Entry, ...]:
        """Entries from ``offset`` for a fetch response: at least one if any, then up to the limits."""
        base = offset - self.start
        chunk = self._entries[base : base + max_entries]
        total = 0
        for i, entry in enumerate(chunk):
            total += len(entry.data)
            if total > max_bytes and i > 0:
                return tuple(chunk[:i])
        return tuple(chunk)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch | None:
        """Kafka's ``endOffsetForEpoch``: the largest epoch <= ``epoch`` in this log and the offset
        where it ends (where the next larger epoch starts, or the log end). None when ``epoch`` is
        older than anything the log still knows (it lies inside the snapshot)."""
        i = bisect.bisect_right(self._epoch_list, epoch) - 1
        if i < 0:
            return None
        end = self._epoch_starts[i + 1] if i + 1 < len(self._epoch_starts) else self.end
        return OffsetAndEpoch(end, self._epoch_list[i])

    def epoch_start_offset(self, epoch: int) -> int | None:
        """First offset of ``epoch`` in this log, if it has entries of exactly that epoch."""
        i = bisect.bisect_left(self._epoch_list, epoch)
        if i < len(self._epoch_list) and self._epoch_list[i] == epoch:
            return self._epoch_starts[i]
        return None

    # Changes -----------------------------------------------------------------------------

    def append(self, entries: Iterable[Entry]) -> None:
        end = self.end
        if self._unstable_from is None:
            self._unstable_from = end
        for entry in entries:
            if entry.offset != end:
                raise ValueError(f"append at {entry.offset}, log end is {end}")
            if entry.epoch < self.last_epoch:
                raise ValueError(f"entry epoch {entry.epoch} below the last epoch {self.last_epoch}")
            if entry.epoch > self._epoch_list[-1]:
                self._epoch_list.append(entry.epoch)
                self._epoch_starts.append(end)
            self._entries.append(entry)
            end += 1

    def truncate(self, end_offset: int) -> None:
        """Drop every entry at ``end_offset`` and above."""
        if end_offset >= self.end:
            return
        if end_offset < self.start:
            raise ValueError(f"truncate to {end_offset} below the log start {self.start}")
        del self._entries[end_offset - self.start :]
        # The base element of the epoch cache (index 0) stands for the snapshot and stays.
        while len(self._epoch_starts) > 1 and self._epoch_starts[-1] >= end_offset:
            self._epoch_starts.pop()
            self._epoch_list.pop()
        self._mark_unstable(end_offset)

    def compact(self, new_start: int) -> None:
        """Drop entries below ``new_start`` (they are covered by a snapshot)."""
        if new_start <= self.start:
            return
        if new_start > self.end:
            raise ValueError(f"compact to {new_start} beyond the log end {self.end}")
        prev = self.epoch_at(new_start - 1)
        assert prev is not None
        del self._entries[: new_start - self.start]
        self.start = new_start
        self._prev_epoch = prev
        self._rebuild_epochs()

    def reset(self, snapshot: Snapshot) -> None:
        """Discard the whole log: it now starts empty right after ``snapshot``."""
        # Marking the old start unstable makes the next Ready truncate the stored log fully.
        self._mark_unstable(self.start)
        self._entries = []
        self.start = snapshot.end_offset
        self._prev_epoch = snapshot.epoch
        self._rebuild_epochs()

    def _mark_unstable(self, offset: int) -> None:
        if self._unstable_from is None or offset < self._unstable_from:
            self._unstable_from = offset

    def _rebuild_epochs(self) -> None:
        # Parallel sorted lists for bisect. Element 0 is the snapshot's epoch "starting" at the
        # log start: entries of that epoch below the start are unknown and never asked about.
        epochs = [self._prev_epoch]
        starts = [self.start]
        for entry in self._entries:
            if entry.epoch > epochs[-1]:
                epochs.append(entry.epoch)
                starts.append(entry.offset)
        self._epoch_list = epochs
        self._epoch_starts = starts

    # Persistence -------------------------------------------------------------------------

    @property
    def has_changes(self) -> bool:
        return self._unstable_from is not None or self._reported_start != self.start

    def take_changes(self) -> LogChanges:
        """What the driver must do to its stored log; from now on the stored log is assumed to
        equal this log (the driver persists a Ready before acting on anything after it)."""
        truncate_to: int | None = None
        entries: list[Entry] = []
        if self._unstable_from is not None:
            if self._unstable_from < self._stable_end:
                truncate_to = self._unstable_from
            first = max(self._unstable_from, self.start)
            entries = self._entries[first - self.start :]
        log_start = self.start if self.start != self._reported_start else None
        self._unstable_from = None
        self._stable_end = self.end
        self._reported_start = self.start
        return LogChanges(truncate_to, log_start, entries)
