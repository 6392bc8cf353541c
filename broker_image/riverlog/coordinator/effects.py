"""What the pure coordinator state machine hands back to its asyncio shell.

An operation (a request, a timer firing, a finished write) yields a :class:`Result`: replies
to deliver now (``token -> response body``), records to append to the group's
``__consumer_offsets`` partition, and a continuation to run once those records are durable
(or failed to be written). The shell does the I/O; the state machine only decides.

Timers live in :class:`Timers`, a table of deadlines the state machine sets and cancels with
keys; the shell only asks for the next deadline and calls ``tick`` when it passes, so tests
drive time by hand.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..protocol.errors import ErrorCode
from .records import CoordinatorRecord

Body = dict[str, Any]
Reply = tuple[int, Body]
AfterWrite = Callable[[ErrorCode], None]


@dataclass
class TxnWrite:
    """Records to append as one transactional batch of a producer (a TxnOffsetCommit): they
    join the producer's open transaction on the partition, and ``after`` runs once they are
    durable (NONE) or could not be written (the error), like ``Result.after_write``."""

    producer_id: int
    producer_epoch: int
    records: list[CoordinatorRecord]
    after: AfterWrite


@dataclass
class Result:
    replies: list[Reply] = field(default_factory=list)
    records: list[CoordinatorRecord] = field(default_factory=list)
    # Run with NONE once ``records`` are committed, or with the (coordinator-facing) error
    # code when the write failed. It runs inside the state machine and adds to a new Result.
    after_write: list[AfterWrite] = field(default_factory=list)
    # Transactional batches, appended after ``records`` (one batch each).
    txn_writes: list[TxnWrite] = field(default_factory=list)

    def reply(self, token: int | None, body: Body) -> None:
        if token is not None:
            self.replies.append((token, body))

    def write(self, records: list[CoordinatorRecord], after: AfterWrite | None = None) -> None:
        self.records.extend(records)
        if after is not None:
            self.after_write.append(after)

    def write_transactional(self, write: TxnWrite) -> None:
        self.txn_writes.append(write)

    def extend(self, other: Result) -> None:
        self.replies.extend(other.replies)
        self.records.extend(other.records)
        self.after_write.extend(other.after_write)
        self.txn_writes.extend(other.txn_writes)

    @property
    def empty(self) -> bool:
        return not (self.replies or self.records or self.after_write or self.txn_writes)


TimerKey = tuple[str, ...]


class Timers:
    """Deadlines by key. Scheduling a key again replaces its previous deadline.

    A heap ordered by deadline with lazy deletion: replaced or cancelled entries stay in the
    heap until they surface and are skipped, so every operation is O(log n) even with many
    members heartbeating.
    """

    def __init__(self) -> None:
        self._entries: dict[TimerKey, tuple[int, int, Callable[[], None]]] = {}
        self._heap: list[tuple[int, int, TimerKey]] = []
        self._seq = 0

    def schedule(self, key: TimerKey, deadline_ms: int, action: Callable[[], None]) -> None:
        self._seq += 1
        self._entries[key] = (deadline_ms, self._seq, action)
        heapq.heappush(self._heap, (deadline_ms, self._seq, key))

    def cancel(self, key: TimerKey) -> None:
        self._entries.pop(key, None)

    def deadline(self, key: TimerKey) -> int | None:
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry[1] == seq:
                return
            heapq.heappop(heap)

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_expired(self, now_ms: int) -> tuple[TimerKey, Callable[[], None]] | None:
        """The earliest entry due at ``now_ms``, removed from the table; None if none is due."""
        self._drop_stale()
        if not self._heap or self._heap[0][0] > now_ms:
            return None
        _, _, key = heapq.heappop(self._heap)
        _, _, action = self._entries.pop(key)
        return key, action

    def clear(self) -> None:
        self._entries.clear()
        self._heap.clear()

    def __len__(self) -> int:
        return len(self._entries)
