"""Leader epoch cache: the start offset of every leader epoch, in Kafka's checkpoint format.

File ``leader-epoch-checkpoint``::

    0                      (version)
    <number of entries>
    <epoch> <start offset>
    ...

Followers use it (OffsetsForLeaderEpoch) to find where their log diverges from the leader's.
"""

from __future__ import annotations

from pathlib import Path

from .files import atomic_write, fsync_path

CHECKPOINT_NAME = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, directory: Path) -> None:
        self.path = directory / CHECKPOINT_NAME
        self.entries: list[tuple[int, int]] = []  # (epoch, start offset), both increasing
        self._unsynced = True  # the first flush syncs whatever the file holds
        # Written without a need to survive a crash on its own (no record depends on it yet):
        # synced by the first flush that makes records durable, which then depend on it.
        self._deferred = False

    def load(self) -> bool:
        """Read the checkpoint; False if it is missing or malformed (the log then rebuilds it)."""
        try:
            lines = self.path.read_text().split("\n")
        except (FileNotFoundError, UnicodeDecodeError):
            return False
        try:
            if lines[0].strip() != "0":
                return False
            count = int(lines[1])
            entries = []
            for line in lines[2 : 2 + count]:
                epoch, offset = line.split()
                entries.append((int(epoch), int(offset)))
        except (IndexError, ValueError):
            return False
        if len(entries) != count or any(
            a[0] >= b[0] or a[1] > b[1] for a, b in zip(entries, entries[1:], strict=False)
        ):
            return False
        self.entries = entries
        return True

    def write(self, *, sync: bool = False, durable: bool = True) -> None:
        """Replace the file; ``sync`` fsyncs it now, else the next flush does (unless not
        ``durable``: nothing depends on this version yet, so only a flush that also makes records
        durable syncs it)."""
        lines = ["0", str(len(self.entries)), *(f"{e} {o}" for e, o in self.entries)]
        atomic_write(self.path, ("\n".join(lines) + "\n").encode(), sync=sync)
        # Marked after the rename: a flush racing with the write syncs the new file or, having
        # cleared the mark first, leaves it for the next flush. (Writes hold the log's lock.)
        if sync:
            self._unsynced = self._deferred = False
        elif durable:
            self._unsynced = True
        else:
            self._deferred = True

    def mark_synced(self, *, deferred: bool = False) -> None:
        """Nothing to sync (the loader made it durable); ``deferred``: nothing yet, until records
        that depend on it are made durable (a brand-new log)."""
        self._unsynced = False
        self._deferred = deferred

    def flush(self, *, records_synced: bool = False) -> bool:
        """fsync the file if written since the last flush, or if it waits for the records this
        flush made durable (``records_synced``); True if it did."""
        if not (self._unsynced or (self._deferred and records_synced)):
            return False
        self._unsynced = self._deferred = False
        fsync_path(self.path)
        return True

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed.

        Like Kafka, a new entry wins over any conflicting ones: entries with an epoch >= it or a
        start offset >= its start are dropped (they came from a log tail that was replaced).
        """
        if epoch < 0:
            return False
        if self.entries and self.entries[-1][0] == epoch and self.entries[-1][1] <= start_offset:
            return False  # already known: an epoch starts at the first offset seen for it
        kept = [(e, o) for e, o in self.entries if e < epoch and o < start_offset]
        self.entries = [*kept, (epoch, start_offset)]
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop epochs starting at or after ``end_offset`` (the log was truncated there)."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        changed = len(kept) != len(self.entries)
        self.entries = kept
        return changed

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log now starts at ``start_offset``: keep the epoch covering it, moved up to it."""
        below = [i for i, (_, o) in enumerate(self.entries) if o <= start_offset]
        if not below:
            return False
        last = below[-1]
        epoch, offset = self.entries[last]
        if last == 0 and offset == start_offset:
            return False
        self.entries = [(epoch, start_offset), *self.entries[last + 1 :]]
        return True

    def epoch_for_offset(self, offset: int) -> int:
        result = UNDEFINED_EPOCH
        for epoch, start in self.entries:
            if start > offset:
                break
            result = epoch
        return result

    def end_offset_for_epoch(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (the largest epoch <= requested, the start offset of the next
        epoch after it), or (requested, log end) for the latest epoch; (-1, -1) if unknown."""
        if requested == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested == self.latest_epoch:
            return requested, log_end_offset
        higher = next(((e, o) for e, o in self.entries if e > requested), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        floor = None
        for e, o in self.entries:
            if e > requested:
                break
            floor = (e, o)
        if floor is None:
            return requested, higher[1]
        return floor[0], higher[1]
