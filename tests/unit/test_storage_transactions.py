"""Transactions in a partition's log: open transactions and the last stable offset, markers and
their checks, the aborted transaction index, and all of it across restarts, crashes, truncation,
replication and retention."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from riverlog.protocol.errors import ErrorCode, KafkaError
from riverlog.protocol.record_batch import NewRecord, build_batch, iter_records
from riverlog.storage.config import LogConfig
from riverlog.storage.log import Log
from riverlog.storage.producer_state import ProducerStateManager
from riverlog.storage.txn_index import ENTRY_SIZE, AbortedTxn, decode_entries

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000
PID, OTHER = 1000, 2000


def txn_batch(seq: int, n: int = 2, *, pid: int = PID, epoch: int = 0, transactional: bool = True) -> bytes:
    records = [NewRecord(b"v%d" % (seq + i), None, (), NOW) for i in range(n)]
    return build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       transactional=transactional)


def open_log(path: Path, **config: object) -> Log:
    return Log.open(path / "t-0", LogConfig(**config), now_ms=NOW)


def append(log: Log, data: bytes, **kw: bool) -> int:
    return log.append_as_leader(data, leader_epoch=0, now_ms=NOW, **kw).first_offset


def marker(log: Log, committed: bool, *, pid: int = PID, epoch: int = 0, coordinator_epoch: int = 0) -> int:
    return log.append_txn_marker(producer_id=pid, producer_epoch=epoch, coordinator_epoch=coordinator_epoch,
                                 committed=committed, leader_epoch=0, now_ms=NOW).first_offset


def replicate(log: Log) -> None:
    log.update_high_watermark(log.log_end_offset)


def crash(log: Log) -> None:
    for segment in log.segments:
        segment.offset_index.close_file()
        segment.time_index.close_file()
        segment.file.close()


def expect_error(call: object, code: ErrorCode) -> None:
    assert callable(call)
    with pytest.raises(KafkaError) as err:
        call()
    assert err.value.code == code


def txn_index_files(log: Log) -> dict[str, list[AbortedTxn]]:
    return {p.name: decode_entries(p.read_bytes()) for p in sorted(log.directory.glob("*.txnindex"))}


def test_open_transaction_holds_the_last_stable_offset_until_its_marker_is_replicated(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, txn_batch(0, transactional=False, pid=OTHER))  # 0-1, idempotent only
    assert append(log, txn_batch(0)) == 2  # 2-3 opens PID's transaction
    append(log, txn_batch(2))  # 4-5 continues it
    replicate(log)
    assert log.last_stable_offset() == 2
    assert log.producers.producers[PID].current_txn_first_offset == 2
    assert marker(log, committed=True) == 6
    # The marker is written but not replicated: an abort could still be lost, so the LSO stays.
    assert log.high_watermark == 6 and log.last_stable_offset() == 2
    replicate(log)
    assert log.last_stable_offset() == 7
    assert log.producers.producers[PID].current_txn_first_offset == -1
    assert txn_index_files(log) == {}  # commits are not indexed
    log.close()


def test_lso_is_capped_by_the_high_watermark(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, txn_batch(0, transactional=False))
    log.update_high_watermark(1)
    assert log.last_stable_offset() == 1
    log.close()


def test_abort_is_indexed_in_kafkas_layout(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, txn_batch(0))  # 0-1 PID
    append(log, txn_batch(0, pid=OTHER))  # 2-3 OTHER, still open after PID's abort
    assert marker(log, committed=False) == 4
    entry = AbortedTxn(PID, 0, 4, 2)  # LSO after the abort: OTHER's open transaction
    (name, raw), = [(p.name, p.read_bytes()) for p in log.directory.glob("*.txnindex")]
    assert name == "00000000000000000000.txnindex"
    assert len(raw) == ENTRY_SIZE == 34
    assert raw == struct.pack(">hqqqq", 0, PID, 0, 4, 2)
    assert log.aborted_transactions(0, 10) == [entry]
    assert log.aborted_transactions(5, 10) == []  # ended before the fetch offset
    assert log.aborted_transactions(0, 0) == []  # starts at the upper bound
    marker(log, committed=False, pid=OTHER)
    assert log.aborted_transactions(3, 10) == [entry, AbortedTxn(OTHER, 2, 5, 6)]
    log.close()


def test_aborted_transaction_spanning_segments_is_found_from_its_data_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, txn_batch(0))  # 0-1
    log.roll(NOW)
    append(log, txn_batch(2, pid=PID))  # 2-3
    log.roll(NOW)
    marker(log, committed=False)  # 4, in the third segment
    assert list(txn_index_files(log)) == ["00000000000000000004.txnindex"]
    assert log.aborted_transactions(1, 5) == [AbortedTxn(PID, 0, 4, 5)]
    log.close()


def test_marker_checks(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, txn_batch(0, epoch=3))
    marker(log, committed=True, epoch=3, coordinator_epoch=5)
    expect_error(lambda: marker(log, committed=False, epoch=2, coordinator_epoch=5), ErrorCode.INVALID_PRODUCER_EPOCH)
    expect_error(lambda: marker(log, committed=False, epoch=3, coordinator_epoch=4),
                 ErrorCode.TRANSACTION_COORDINATOR_FENCED)
    # The same or a newer coordinator may write again (a retry), and a newer producer epoch (a
    # coordinator aborting for a fenced producer) is taken over.
    marker(log, committed=True, epoch=3, coordinator_epoch=5)
    marker(log, committed=False, epoch=4, coordinator_epoch=6)
    entry = log.producers.producers[PID]
    assert (entry.epoch, entry.coordinator_epoch) == (4, 6)
    expect_error(lambda: append(log, txn_batch(2, epoch=3)), ErrorCode.INVALID_PRODUCER_EPOCH)
    assert append(log, txn_batch(0, epoch=4)) == 5  # the new epoch starts at sequence 0
    log.close()


def test_transaction_version_2_markers_must_carry_a_bumped_epoch(tmp_path: Path) -> None:
    """Kafka 4.2's rule for markers of version 2 transactions (WriteTxnMarkers v2): the
    coordinator bumped the epoch at the transaction's end, so a marker at the data's epoch or
    below is stale; writing the same marker again (no transaction open) is a harmless retry."""
    log = open_log(tmp_path)

    def v2_marker(epoch: int, committed: bool = True) -> int:
        return log.append_txn_marker(producer_id=PID, producer_epoch=epoch, coordinator_epoch=0, committed=committed,
                                     leader_epoch=0, now_ms=NOW, transaction_version=2).first_offset

    append(log, txn_batch(0, epoch=3))
    expect_error(lambda: v2_marker(3), ErrorCode.INVALID_PRODUCER_EPOCH)  # not above the data's epoch
    v2_marker(4)
    v2_marker(4)  # a retry once the transaction is closed
    # The next transaction runs at epoch 4; a marker at 4 is stale again while it is open.
    append(log, txn_batch(0, epoch=4))
    expect_error(lambda: v2_marker(4, committed=False), ErrorCode.INVALID_PRODUCER_EPOCH)
    # The classic rule (version 0/1 markers) only refuses older epochs.
    marker(log, committed=False, epoch=4)
    log.close()


def test_marker_without_an_open_transaction_completes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    marker(log, committed=False)
    replicate(log)
    assert log.last_stable_offset() == 1
    assert log.aborted_transactions(0, 10) == []
    log.close()


def test_non_transactional_write_inside_a_transaction_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, txn_batch(0))
    expect_error(lambda: append(log, txn_batch(2, transactional=False)), ErrorCode.INVALID_TXN_STATE)
    assert log.log_end_offset == 2
    log.close()


def test_clients_may_not_send_markers(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    data = build_batch([NewRecord(b"\x00\x00\x00\x00\x00\x00", b"\x00\x00\x00\x01")], control=True,
                       transactional=True, producer_id=PID, producer_epoch=0)
    expect_error(lambda: append(log, data), ErrorCode.INVALID_RECORD)
    log.close()


def test_coordinator_batches_skip_sequence_checks_but_open_the_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path)

    def offsets_batch() -> bytes:
        return build_batch([NewRecord(b"offset", b"key", (), NOW)], producer_id=PID, producer_epoch=2,
                           base_sequence=-1, transactional=True)

    assert append(log, offsets_batch(), from_coordinator=True) == 0
    assert append(log, offsets_batch(), from_coordinator=True) == 1  # no duplicate, no sequence error
    assert log.producers.producers[PID].current_txn_first_offset == 0
    expect_error(lambda: log.append_as_leader(
        build_batch([NewRecord(b"o", b"k")], producer_id=PID, producer_epoch=1, base_sequence=-1, transactional=True),
        leader_epoch=0, now_ms=NOW, from_coordinator=True), ErrorCode.INVALID_PRODUCER_EPOCH)
    marker(log, committed=True, epoch=2)
    replicate(log)
    assert log.last_stable_offset() == 3
    log.close()


def test_open_transactions_survive_a_clean_restart(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, txn_batch(0))
    marker(log, committed=True, coordinator_epoch=7)
    append(log, txn_batch(2))  # 3-4: a second transaction, left open
    replicate(log)
    log.close()
    log = open_log(tmp_path)
    entry = log.producers.producers[PID]
    assert (entry.current_txn_first_offset, entry.coordinator_epoch) == (3, 7)
    assert log.last_stable_offset() == 3
    expect_error(lambda: marker(log, committed=False, coordinator_epoch=6), ErrorCode.TRANSACTION_COORDINATOR_FENCED)
    log.close()


def test_version_1_snapshots_are_still_read(tmp_path: Path) -> None:
    import crc32c

    body = struct.pack(">qi", 10, 1) + struct.pack(">qhqb", PID, 3, NOW, 1) + struct.pack(">iiqqq", 0, 4, 5, 9, -1)
    v1 = struct.pack(">4shI", b"RLPS", 1, crc32c.crc32c(body)) + body
    decoded = ProducerStateManager.decode(v1)
    assert decoded is not None
    offset, producers = decoded
    entry = producers[PID]
    assert (offset, entry.epoch, entry.last_seq, entry.coordinator_epoch, entry.current_txn_first_offset) == (
        10, 3, 4, -1, -1)
    manager = ProducerStateManager(tmp_path)
    manager.producers = producers
    again = ProducerStateManager.decode(manager.encode(10))
    assert again is not None and again[1] == producers


def test_crash_recovery_rebuilds_open_transactions_and_lost_index_entries(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, txn_batch(0))  # 0-1
    append(log, txn_batch(0, pid=OTHER))  # 2-3
    marker(log, committed=False)  # 4
    append(log, txn_batch(2, pid=OTHER))  # 5-6
    replicate(log)
    crash(log)
    (index_file,) = log.directory.glob("*.txnindex")
    index_file.unlink()  # never reached the disk
    for snapshot in log.directory.glob("*.producer-snapshot"):
        snapshot.unlink()
    log = open_log(tmp_path)
    assert log.aborted_transactions(0, 10) == [AbortedTxn(PID, 0, 4, 2)]
    assert log.producers.producers[OTHER].current_txn_first_offset == 2
    # The high watermark was never checkpointed: until it passes the abort marker, PID's
    # transaction holds the LSO too.
    assert log.high_watermark == 0 and log.last_stable_offset() == 0
    replicate(log)
    assert log.last_stable_offset() == 2
    log.close()
    log = open_log(tmp_path)  # and no duplicate entry after a second recovery-free open
    assert log.aborted_transactions(0, 10) == [AbortedTxn(PID, 0, 4, 2)]
    log.close()


def test_truncation_drops_index_entries_and_reopens_transactions(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, txn_batch(0))  # 0-1
    marker(log, committed=False)  # 2
    append(log, txn_batch(0, pid=OTHER))  # 3-4
    marker(log, committed=False, pid=OTHER)  # 5
    log.truncate_to(5)
    assert log.aborted_transactions(0, 10) == [AbortedTxn(PID, 0, 2, 3)]
    assert log.producers.ongoing == {OTHER: 3}
    log.truncate_to(2)
    assert log.aborted_transactions(0, 10) == [] and txn_index_files(log) == {}
    assert log.producers.ongoing == {PID: 0}
    log.close()


def test_follower_rebuilds_the_same_state(tmp_path: Path) -> None:
    leader = Log.open(tmp_path / "leader", LogConfig(), now_ms=NOW)
    append(leader, txn_batch(0))
    append(leader, txn_batch(0, pid=OTHER))
    marker(leader, committed=False, coordinator_epoch=3)
    follower = Log.open(tmp_path / "follower", LogConfig(), now_ms=NOW)
    follower.append_as_follower(leader.read_records_bytes(0, 1 << 20), now_ms=NOW)
    assert follower.aborted_transactions(0, 10) == leader.aborted_transactions(0, 10) == [AbortedTxn(PID, 0, 4, 2)]
    assert follower.producers.ongoing == {OTHER: 2}
    assert follower.producers.producers[PID].coordinator_epoch == 3
    replicate(follower)
    assert follower.last_stable_offset() == 2
    leader.close()
    follower.close()


def test_retention_removes_the_index_with_its_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, txn_batch(0))
    marker(log, committed=False)
    log.roll(NOW)
    append(log, txn_batch(2, transactional=False))
    replicate(log)
    assert log.delete_records_before(3) == 3
    assert txn_index_files(log) == {}
    assert [p.name for p in log.directory.glob("*.txnindex*")] == ["00000000000000000000.txnindex.deleted"]
    assert log.aborted_transactions(3, 10) == []
    log.close()
    assert list(log.directory.glob("*.txnindex*")) == []


def test_compaction_keeps_markers_and_the_aborted_index(tmp_path: Path) -> None:
    from riverlog.storage.cleaner import clean

    log = open_log(tmp_path, cleanup_policy="compact", file_delete_delay_ms=0)

    def keyed(seq: int, key: bytes, *, transactional: bool, pid: int = PID) -> bytes:
        return build_batch([NewRecord(b"v%d" % seq, key, (), NOW)], producer_id=pid, producer_epoch=0,
                           base_sequence=seq, transactional=transactional)

    append(log, keyed(0, b"k", transactional=True))  # 0
    marker(log, committed=False)  # 1
    append(log, keyed(0, b"k", transactional=False, pid=OTHER))  # 2: supersedes offset 0's key
    log.roll(NOW)
    append(log, keyed(1, b"k", transactional=False, pid=OTHER))  # 3
    log.roll(NOW)
    replicate(log)
    assert clean(log, NOW) is not None
    kept = [(h.is_control, r.offset) for h, r in iter_records(log.read_records_bytes(0, 1 << 20))]
    assert kept == [(True, 1), (False, 3)]  # the cleaned segment replaced the first ones
    assert log.aborted_transactions(0, 10) == [AbortedTxn(PID, 0, 1, 2)]
    assert list(txn_index_files(log)) == ["00000000000000000000.txnindex"]
    log.close()
    log = open_log(tmp_path, cleanup_policy="compact")
    assert log.aborted_transactions(0, 10) == [AbortedTxn(PID, 0, 1, 2)]
    log.close()


def test_unreplicated_completion_still_holds_the_lso_after_a_restart(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, txn_batch(0))  # 0-1
    log.update_high_watermark(2)
    marker(log, committed=True)  # 2, not replicated
    log.roll(NOW)  # a snapshot at 3, past the marker
    append(log, txn_batch(0, pid=OTHER, transactional=False))  # 3-4
    assert log.last_stable_offset() == 0
    log.close()
    log = open_log(tmp_path)
    assert (log.high_watermark, log.last_stable_offset()) == (2, 0)
    replicate(log)
    assert log.last_stable_offset() == 5
    log.close()
