"""One share-partition: the delivery state of a topic partition's records for one share group.

KIP-932 gives a partition queue semantics. The *share-partition start offset* (SPSO) is the first
offset not yet done with (every record below it was acknowledged or archived); the *end offset*
(SPEO, kept here exclusive: the first offset never yet handed out) bounds the records *in flight*
between them, each in one state:

* AVAILABLE -- may be acquired (again);
* ACQUIRED -- handed to one member, locked until a deadline (``group.share.record.lock.duration.ms``);
* ACKNOWLEDGED -- accepted by its member, done;
* ARCHIVED -- rejected, a gap, or delivered ``group.share.delivery.count.limit`` times, done.

A member acknowledges what it holds: ACCEPT (1) acknowledges, RELEASE (2) makes the record
available again, REJECT (3) archives it, RENEW (4) extends the lock; GAP (0) marks an offset the
log has no record for (compacted away, a control record) and archives it. A record released,
whose lock expired, or whose member left, goes back to AVAILABLE unless it was already delivered
the limit's number of times, then it is archived, so a poison record cannot loop forever. The
SPSO moves past every done record at the front.

The limit on in-flight records (``group.share.partition.max.record.locks``) bounds the window
SPEO - SPSO, not the acquired records alone: no new offsets are handed out while the window is
full, so the state kept per partition stays bounded however far consumers fall behind.

Pure: times are passed in (``now_ms``), the log is seen only through its offsets. Records are
tracked per offset; what goes on the wire (acquired ranges, persisted state batches) is
compressed into ranges of equal state and delivery count.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from ..group_config import ShareReset

DEFAULT_RECORD_LOCK_DURATION_MS = 30_000
DEFAULT_DELIVERY_COUNT_LIMIT = 5
DEFAULT_MAX_RECORD_LOCKS = 2000
NO_LOCK = 2**63  # a lock deadline later than any real one (ms)


class RecordState(enum.IntEnum):
    """Kafka's record state ids (also the ``DeliveryState`` of persisted state batches)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class AcknowledgeType(enum.IntEnum):
    """The ``AcknowledgeTypes`` of ShareFetch/ShareAcknowledge."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


_ACCEPT, _RELEASE, _RENEW = int(AcknowledgeType.ACCEPT), int(AcknowledgeType.RELEASE), int(AcknowledgeType.RENEW)
_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)


class InvalidRecordState(Exception):
    """An acknowledgement of records the member does not hold (Kafka's INVALID_RECORD_STATE)."""


class InvalidAcknowledgement(Exception):
    """A malformed acknowledgement batch (Kafka's INVALID_REQUEST)."""


@dataclass(frozen=True)
class ShareSettings:
    record_lock_duration_ms: int = DEFAULT_RECORD_LOCK_DURATION_MS
    delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT
    max_record_locks: int = DEFAULT_MAX_RECORD_LOCKS


def reset_start_offset(reset: ShareReset, log_start_offset: int, log_end_offset: int, now_ms: int,
                       offset_for_timestamp: Callable[[int], int | None] | None) -> int:
    """Where a share-partition without state starts (``share.auto.offset.reset``): the log's end
    (``latest``: only records produced from now on), its start (``earliest``), or the first record
    written at or after ``now - duration`` (``by_duration``; the log's end when there is none,
    as a timestamp lookup past the last record finds nothing)."""
    if reset.kind == "earliest":
        return log_start_offset
    if reset.kind == "by_duration" and offset_for_timestamp is not None:
        found = offset_for_timestamp(now_ms - reset.duration_ms)
        if found is not None:
            return min(max(found, log_start_offset), log_end_offset)
    return log_end_offset


@dataclass(slots=True)
class InFlightRecord:
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_deadline_ms: int | None = None


@dataclass(frozen=True)
class AcquiredRange:
    """Offsets acquired together with the same delivery count (ShareFetch's AcquiredRecords)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class AcknowledgementBatch:
    """``types`` holds one type for the whole range, or one per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]

    def type_at(self, offset: int) -> int:
        return self.types[0] if len(self.types) == 1 else self.types[offset - self.first_offset]


@dataclass(frozen=True)
class AcknowledgementUndo:
    """What an acknowledgement changed, to take it back when its state write fails. Every record
    it touched was acquired by ``member_id`` (the acknowledgement was checked), so each one's
    delivery count, lock deadline and the type applied to it say all: offset -> those three."""

    member_id: str
    before: dict[int, tuple[int, int | None, int]]


@dataclass(frozen=True)
class StateBatch:
    """A persisted range of equal delivery state and count (WriteShareGroupState's StateBatch)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


class SharePartition:
    """The in-flight records of one share-partition and the transitions between their states."""

    def __init__(self, start_offset: int, settings: ShareSettings | None = None, state_epoch: int = 0) -> None:
        self.settings = settings or ShareSettings()
        self.state_epoch = state_epoch
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.in_flight: dict[int, InFlightRecord] = {}
        # No acquired record's lock ends before this (a lower bound, exact after each expiry
        # scan): lock expiry is checked on every fetch and acknowledgement, and is then a compare.
        self._lock_floor = NO_LOCK
        # No record below this is AVAILABLE (a lower bound): acquisition scans the in-flight
        # window from here, not from the start, on every fetch.
        self._available_from = start_offset

    # --- creation -------------------------------------------------------------------------------

    @classmethod
    def initialize(
        cls,
        reset: ShareReset,
        log_start_offset: int,
        log_end_offset: int,
        settings: ShareSettings | None = None,
        *,
        now_ms: int = 0,
        offset_for_timestamp: Callable[[int], int | None] | None = None,
    ) -> SharePartition:
        """A share-partition the group never had state for, starting where ``reset`` says."""
        start = reset_start_offset(reset, log_start_offset, log_end_offset, now_ms, offset_for_timestamp)
        return cls(start, settings, state_epoch=0)

    @classmethod
    def from_state(
        cls,
        start_offset: int,
        batches: Iterable[StateBatch],
        settings: ShareSettings | None = None,
        state_epoch: int = 0,
    ) -> SharePartition:
        """The share-partition persisted state describes (a new leader taking it over). Locks do
        not survive a leader change: a record persisted as acquired is available again, keeping
        its delivery count so it still reaches the limit."""
        part = cls(start_offset, settings, state_epoch)
        # A state never spans more than the in-flight window; a larger one (not written by a
        # leader) is cut to it rather than expanded offset by offset.
        window_end = start_offset + part.settings.max_record_locks
        for batch in batches:
            state = RecordState(batch.delivery_state) if batch.delivery_state in RecordState._value2member_map_ \
                else RecordState.AVAILABLE
            if state is RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            for offset in range(max(batch.first_offset, start_offset), min(batch.last_offset + 1, window_end)):
                part.in_flight[offset] = InFlightRecord(state, batch.delivery_count)
                part.end_offset = max(part.end_offset, offset + 1)
        # Offsets between recorded batches were never handed out before the state was written;
        # they are available with no deliveries.
        for offset in range(part.start_offset, part.end_offset):
            part.in_flight.setdefault(offset, InFlightRecord(RecordState.AVAILABLE, 0))
        part._available_from = part.start_offset
        part._advance_start()
        return part

    # --- acquisition ----------------------------------------------------------------------------

    def acquire(self, member_id: str, now_ms: int, fetchable_end: int, max_records: int) -> list[AcquiredRange]:
        """Hand ``member_id`` up to ``max_records`` records: available in-flight ones first (oldest
        first), then offsets never handed out, below ``fetchable_end`` (the high watermark, or
        the last stable offset under read_committed) and within the in-flight window."""
        in_flight = self.in_flight
        deadline = now_ms + self.settings.record_lock_duration_ms
        again: list[int] = []
        scan_end = min(self.end_offset, fetchable_end)
        offset = max(self._available_from, self.start_offset)
        while offset < scan_end and len(again) < max_records:
            rec = in_flight[offset]
            if rec.state is RecordState.AVAILABLE:
                again.append(offset)
                rec.state, rec.member_id, rec.lock_deadline_ms = RecordState.ACQUIRED, member_id, deadline
                rec.delivery_count += 1
            offset += 1
        self._available_from = offset  # every record below was looked at: none is available now
        ranges = _ranges(again, in_flight)
        # Offsets never handed out: one range, delivery count 1.
        first_new = self.end_offset
        new_end = min(fetchable_end, self.start_offset + self.settings.max_record_locks,
                      first_new + max_records - len(again))
        for new in range(first_new, new_end):
            in_flight[new] = InFlightRecord(RecordState.ACQUIRED, 1, member_id, deadline)
        if new_end > first_new:
            self.end_offset = new_end
            last = ranges[-1] if ranges else None
            if last is not None and last.last_offset == first_new - 1 and last.delivery_count == 1:
                ranges[-1] = AcquiredRange(last.first_offset, new_end - 1, 1)
            else:
                ranges.append(AcquiredRange(first_new, new_end - 1, 1))
        if ranges:
            self._lock_floor = min(self._lock_floor, deadline)
        return ranges

    def archive_acquired(self, member_id: str, ranges: list[AcquiredRange],
                         spans: Sequence[tuple[int, int]]) -> list[AcquiredRange]:
        """Archive the records of ``spans`` (first, last offsets) that ``member_id`` just acquired
        in ``ranges`` -- an aborted transaction's, under read_committed -- and return the ranges
        without them."""
        archived: set[int] = set()
        for first, last in spans:
            for offset in range(first, last + 1):
                rec = self.in_flight.get(offset)
                if rec is not None and rec.state is RecordState.ACQUIRED and rec.member_id == member_id:
                    self._finish(rec, RecordState.ARCHIVED)
                    archived.add(offset)
        self._advance_start()
        out: list[AcquiredRange] = []
        for r in ranges:
            run_start: int | None = None
            for offset in range(r.first_offset, r.last_offset + 2):
                keep = offset <= r.last_offset and offset not in archived
                if keep and run_start is None:
                    run_start = offset
                elif not keep and run_start is not None:
                    out.append(AcquiredRange(run_start, offset - 1, r.delivery_count))
                    run_start = None
        return out

    def next_acquirable_offset(self, fetchable_end: int) -> int | None:
        """The lowest offset :meth:`acquire` would hand out (where the leader starts reading)."""
        for offset in range(max(self._available_from, self.start_offset), min(self.end_offset, fetchable_end)):
            if self.in_flight[offset].state is RecordState.AVAILABLE:
                return offset
        window_end = self.start_offset + self.settings.max_record_locks
        return self.end_offset if self.end_offset < min(fetchable_end, window_end) else None

    def has_acquirable(self, fetchable_end: int) -> bool:
        """Whether :meth:`acquire` would hand out anything (for a fetch waiting for records)."""
        window_end = self.start_offset + self.settings.max_record_locks
        if self.end_offset < min(fetchable_end, window_end):
            return True
        return any(self.in_flight[o].state is RecordState.AVAILABLE
                   for o in range(max(self._available_from, self.start_offset), self.end_offset))

    # --- acknowledgement ------------------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch], now_ms: int) -> AcknowledgementUndo:
        """Apply a member's acknowledgements, all or none: every batch is checked first. Returns
        what :meth:`rollback` needs to take them back. (The hot path of a share consumer: plain
        ints and tuples per record, no enum or dataclass construction.)"""
        for batch in batches:
            self._check(member_id, batch)
        in_flight = self.in_flight
        before: dict[int, tuple[int, int | None, int]] = {}
        renewed_deadline = now_ms + self.settings.record_lock_duration_ms
        for batch in batches:
            types = batch.types
            first = batch.first_offset
            for offset in range(first, batch.last_offset + 1):
                rec = in_flight[offset]
                kind = types[0] if len(types) == 1 else types[offset - first]
                if offset not in before:
                    before[offset] = (rec.delivery_count, rec.lock_deadline_ms, kind)
                if kind == _ACCEPT:
                    rec.state, rec.member_id, rec.lock_deadline_ms = RecordState.ACKNOWLEDGED, None, None
                elif kind == _RELEASE:
                    self._release(offset, rec)
                elif kind == _RENEW:
                    rec.lock_deadline_ms = renewed_deadline
                else:  # REJECT, GAP
                    rec.state, rec.member_id, rec.lock_deadline_ms = RecordState.ARCHIVED, None, None
        self._advance_start()
        return AcknowledgementUndo(member_id, before)

    def rollback(self, undo: AcknowledgementUndo) -> None:
        """Take back an acknowledgement whose state write failed, as Kafka does
        (``rollbackOrProcessStateUpdates``): its records are again held by their member until
        the lock's deadline, so the member's error is true and a record not durably accepted is
        delivered again. A record acquired since (released, then fetched) is left as it is."""
        if not undo.before:
            return
        lowest = min(undo.before)
        if lowest < self.start_offset:
            # The start moved past records of this acknowledgement: the records in between come
            # back as done (the start only passes done records); this one's are restored below.
            for offset in range(lowest, self.start_offset):
                self.in_flight.setdefault(offset, InFlightRecord(RecordState.ACKNOWLEDGED, 1))
            self.start_offset = lowest
        for offset, (count, deadline, kind) in undo.before.items():
            current = self.in_flight.get(offset)
            if current is None or (current.state is RecordState.ACQUIRED
                                   and (kind != _RENEW or current.member_id != undo.member_id)):
                continue
            self.in_flight[offset] = InFlightRecord(RecordState.ACQUIRED, count, undo.member_id, deadline)
            if deadline is not None:
                self._lock_floor = min(self._lock_floor, deadline)
        self._advance_start()

    def _check(self, member_id: str, batch: AcknowledgementBatch) -> None:
        if batch.first_offset > batch.last_offset:
            raise InvalidAcknowledgement(f"first offset {batch.first_offset} after last {batch.last_offset}")
        count = batch.last_offset - batch.first_offset + 1
        if len(batch.types) not in (1, count):
            raise InvalidAcknowledgement(f"{len(batch.types)} acknowledge types for {count} offsets")
        if any(t not in _ACK_TYPES for t in batch.types):
            raise InvalidAcknowledgement(f"unknown acknowledge type in {list(batch.types)}")
        # Only in-flight offsets can be held: checked first, so a hostile range costs nothing.
        if batch.first_offset < self.start_offset or batch.last_offset >= self.end_offset:
            raise InvalidRecordState(f"offsets {batch.first_offset}-{batch.last_offset} are not in flight")
        for offset in range(batch.first_offset, batch.last_offset + 1):
            rec = self.in_flight.get(offset)
            if rec is None or rec.state is not RecordState.ACQUIRED or rec.member_id != member_id:
                raise InvalidRecordState(f"offset {offset} is not acquired by member {member_id}")

    # --- locks and members ----------------------------------------------------------------------

    def expire_locks(self, now_ms: int) -> list[int]:
        """Release every record whose lock deadline has passed; the offsets released."""
        if now_ms < self._lock_floor:
            return []
        expired: list[int] = []
        floor = NO_LOCK
        for offset, rec in self._acquired():
            deadline = rec.lock_deadline_ms
            if deadline is None:
                continue
            if deadline <= now_ms:
                expired.append(offset)
            else:
                floor = min(floor, deadline)
        self._lock_floor = floor
        for offset in expired:
            self._release(offset, self.in_flight[offset])
        self._advance_start()
        return expired

    def next_lock_deadline(self) -> int | None:
        deadlines = [r.lock_deadline_ms for _, r in self._acquired() if r.lock_deadline_ms is not None]
        return min(deadlines) if deadlines else None

    def release_member(self, member_id: str) -> list[int]:
        """A member left (or its share session closed): what it held is released."""
        held = [o for o, r in self._acquired() if r.member_id == member_id]
        for offset in held:
            self._release(offset, self.in_flight[offset])
        self._advance_start()
        return held

    def acquired_by(self, member_id: str) -> list[int]:
        return [o for o, r in self._acquired() if r.member_id == member_id]

    # --- the log moving under the partition -----------------------------------------------------

    def advance_log_start(self, log_start_offset: int) -> None:
        """Records below the log start offset are gone (retention, DeleteRecords): nothing below it
        can be delivered, so the SPSO moves up to it."""
        if log_start_offset <= self.start_offset:
            return
        for offset in range(self.start_offset, min(log_start_offset, self.end_offset)):
            self.in_flight.pop(offset, None)
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self._advance_start()

    # --- persistence ----------------------------------------------------------------------------

    def state_batches(self) -> list[StateBatch]:
        """The in-flight records as persisted: ranges of equal state and delivery count. An
        acquired record is written as available (locks belong to the leader that granted them)."""
        # One object per range, not per offset: this runs for every state write, over the window.
        out: list[StateBatch] = []
        first = state = count = -1
        acquired, available = RecordState.ACQUIRED, RecordState.AVAILABLE
        in_flight = self.in_flight
        for offset in range(self.start_offset, self.end_offset):
            rec = in_flight[offset]
            rec_state = available if rec.state is acquired else rec.state
            if rec_state == state and rec.delivery_count == count:
                continue
            if first >= 0:
                out.append(StateBatch(first, offset - 1, state, count))
            first, state, count = offset, rec_state, rec.delivery_count
        if first >= 0:
            out.append(StateBatch(first, self.end_offset - 1, state, count))
        return out

    def acquired_count(self) -> int:
        return sum(1 for r in self.in_flight.values() if r.state is RecordState.ACQUIRED)

    def delivery_complete_count(self) -> int:
        """In-flight records already done (acknowledged or archived), for lag (KIP-1226)."""
        return sum(1 for r in self.in_flight.values() if r.state in DONE)

    # --- internals ------------------------------------------------------------------------------

    def _acquired(self) -> Iterator[tuple[int, InFlightRecord]]:
        return ((o, r) for o, r in sorted(self.in_flight.items()) if r.state is RecordState.ACQUIRED)

    def _release(self, offset: int, rec: InFlightRecord) -> None:
        if rec.delivery_count >= self.settings.delivery_count_limit:
            self._finish(rec, RecordState.ARCHIVED)
        else:
            self._finish(rec, RecordState.AVAILABLE)
            self._available_from = min(self._available_from, offset)

    @staticmethod
    def _finish(rec: InFlightRecord, state: RecordState) -> None:
        rec.state = state
        rec.member_id = None
        rec.lock_deadline_ms = None

    def _advance_start(self) -> None:
        while self.start_offset < self.end_offset and self.in_flight[self.start_offset].state in DONE:
            del self.in_flight[self.start_offset]
            self.start_offset += 1


def _ranges(offsets: Sequence[int], records: dict[int, InFlightRecord]) -> list[AcquiredRange]:
    """Ascending ``offsets`` as runs of consecutive offsets with equal delivery counts."""
    out: list[AcquiredRange] = []
    if not offsets:
        return out
    first = previous = offsets[0]
    count = records[first].delivery_count
    for offset in offsets[1:]:
        c = records[offset].delivery_count
        if offset != previous + 1 or c != count:
            out.append(AcquiredRange(first, previous, count))
            first, count = offset, c
        previous = offset
    out.append(AcquiredRange(first, previous, count))
    return out
