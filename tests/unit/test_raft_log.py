"""RaftLog: the epoch cache behind KRaft's fetch validation, and the Ready bookkeeping."""

from __future__ import annotations

import pytest
from riverlog.controller.raft import Entry, OffsetAndEpoch, Snapshot
from riverlog.controller.raft.log import RaftLog

pytestmark = pytest.mark.unit


def entries(*epochs: int, start: int = 0) -> list[Entry]:
    return [Entry(start + i, e, f"d{start + i}".encode()) for i, e in enumerate(epochs)]


def test_end_offset_for_epoch() -> None:
    log = RaftLog(None, entries(1, 1, 3, 3, 3, 4))
    assert log.end == 6 and log.last_epoch == 4
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(2, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(2, 1)  # unknown epoch: largest below it
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(5, 3)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(6, 4)  # latest: the log end
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(6, 4)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)  # before any entry
    assert log.epoch_start_offset(3) == 2 and log.epoch_start_offset(2) is None


def test_truncate_and_append_track_changes_for_ready() -> None:
    log = RaftLog(None, entries(1, 1, 2))
    assert not log.has_changes
    log.append(entries(2, 2, start=3))
    log.truncate(4)
    log.append(entries(3, start=4))
    changes = log.take_changes()
    # Nothing stored was cut (offset 3 and above were never persisted): just append 3 and 4.
    assert changes.truncate_to is None and changes.log_start is None
    assert [(e.offset, e.epoch) for e in changes.entries] == [(3, 2), (4, 3)]
    log.truncate(2)
    log.append(entries(5, start=2))
    changes = log.take_changes()
    assert changes.truncate_to == 2
    assert [(e.offset, e.epoch) for e in changes.entries] == [(2, 5)]
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(2, 1)
    assert not log.has_changes


def test_compact_keeps_epoch_answers_above_the_start() -> None:
    log = RaftLog(None, entries(1, 1, 2, 2, 3))
    log.take_changes()
    log.compact(3)
    assert log.start == 3 and log.prev_epoch == 2
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(4, 2)
    assert log.end_offset_for_epoch(1) is None  # inside the snapshot: the leader sends it
    assert log.epoch_at(2) == 2 and log.epoch_at(1) is None
    changes = log.take_changes()
    assert changes.log_start == 3 and changes.truncate_to is None and not changes.entries


def test_reset_to_a_snapshot_discards_the_stored_log() -> None:
    log = RaftLog(None, entries(1, 1, 2))
    log.take_changes()
    log.reset(Snapshot(10, 4, b""))
    log.append(entries(4, 5, start=10))
    changes = log.take_changes()
    assert changes.truncate_to == 0 and changes.log_start == 10
    assert [e.offset for e in changes.entries] == [10, 11]
    assert log.last_epoch == 5 and log.epoch_at(9) == 4


def test_start_up_reconciles_a_snapshot_written_before_a_crash() -> None:
    # The snapshot made it to disk, the log compaction did not: the continuing suffix stays and
    # the first Ready moves the stored log start.
    log = RaftLog(Snapshot(3, 2, b""), entries(1, 1, 2, 2, 3))
    assert (log.start, log.end, log.prev_epoch) == (3, 5, 2)
    changes = log.take_changes()
    assert changes.log_start == 3 and changes.truncate_to is None and not changes.entries
    # The stored log disagrees with the snapshot at its last entry (an install's truncation was
    # lost): all of it goes.
    log = RaftLog(Snapshot(3, 5, b""), entries(1, 1, 2, 2, 3))
    assert (log.start, log.end, log.last_epoch) == (3, 3, 5)
    changes = log.take_changes()
    assert changes.truncate_to == 0 and changes.log_start == 3


def test_start_up_states_the_log_start_when_no_entries_tell_it() -> None:
    # Crash after the snapshot and the truncation were written but before the log start moved:
    # the stored log is empty and may still start below the snapshot.
    log = RaftLog(Snapshot(7, 2, b""), [])
    changes = log.take_changes()
    assert changes.log_start == 7 and changes.truncate_to is None and not changes.entries
    assert not RaftLog(None, []).has_changes  # a fresh log starts at 0, nothing to say


def test_stored_log_must_be_consistent() -> None:
    with pytest.raises(ValueError):
        RaftLog(None, entries(1, start=2))
    with pytest.raises(ValueError):
        RaftLog(None, [Entry(0, 1, b""), Entry(2, 1, b"")])
    with pytest.raises(ValueError):
        RaftLog(Snapshot(2, 1, b""), entries(1, start=5))
    log = RaftLog(None, entries(2))
    with pytest.raises(ValueError):
        log.append(entries(1, start=1))  # epochs never go down in a log


def test_read_respects_limits() -> None:
    log = RaftLog(None, [Entry(i, 1, b"x" * 10) for i in range(10)])
    assert len(log.read(0, max_bytes=25, max_entries=100)) == 2
    assert len(log.read(0, max_bytes=1, max_entries=100)) == 1  # always at least one
    assert len(log.read(5, max_bytes=1000, max_entries=3)) == 3
    assert log.read(10, max_bytes=1000, max_entries=3) == ()
