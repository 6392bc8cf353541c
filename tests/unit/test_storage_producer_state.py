"""Idempotent producers: duplicates, sequence and epoch checks, state across restarts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from riverlog.protocol.errors import ErrorCode, KafkaError
from riverlog.protocol.record_batch import INT32_MAX, NewRecord, build_batch, iter_records
from riverlog.storage.config import LogConfig
from riverlog.storage.log import Log

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000
PID = 1000


def pbatch(seq: int, n: int = 2, *, pid: int = PID, epoch: int = 0, ts: int = NOW) -> bytes:
    records = [NewRecord(b"seq-%d" % (seq + i), None, (), ts) for i in range(n)]
    return build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def open_log(path: Path, **config: object) -> Log:
    return Log.open(path / "t-0", LogConfig(**config), now_ms=NOW)


def crash(log: Log) -> None:
    for segment in log.segments:
        segment.offset_index.close_file()
        segment.time_index.close_file()
        segment.file.close()


def append(log: Log, data: bytes, now_ms: int = NOW) -> tuple[int, bool]:
    info = log.append_as_leader(data, leader_epoch=0, now_ms=now_ms)
    return info.first_offset, info.duplicate


def expect_error(log: Log, data: bytes, code: ErrorCode) -> None:
    leo = log.log_end_offset
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(data, leader_epoch=0, now_ms=NOW)
    assert err.value.code == code
    assert log.log_end_offset == leo


def values(log: Log) -> list[bytes | None]:
    return [r.value for _h, r in iter_records(log.read_records_bytes(0, 1 << 30))]


def test_duplicate_returns_the_original_offsets_and_appends_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert append(log, pbatch(0)) == (0, False)
    assert append(log, pbatch(2, 3)) == (2, False)
    info = log.append_as_leader(pbatch(0), leader_epoch=0, now_ms=NOW)
    assert (info.first_offset, info.last_offset, info.duplicate, info.record_count) == (0, 1, True, 2)
    assert append(log, pbatch(2, 3)) == (2, True)
    assert log.log_end_offset == 5
    assert values(log) == [b"seq-%d" % i for i in range(5)]
    log.close()


def test_only_the_last_five_batches_are_remembered(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(7):
        append(log, pbatch(i * 2))
    for i in range(2, 7):
        assert append(log, pbatch(i * 2)) == (i * 2, True)
    # Older than the five kept: neither a known duplicate nor the next sequence.
    expect_error(log, pbatch(2), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    log.close()


def test_sequence_gap_is_out_of_order(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, pbatch(0))
    expect_error(log, pbatch(3), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    expect_error(log, pbatch(1), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)  # overlaps, not identical
    assert append(log, pbatch(2)) == (2, False)
    log.close()


def test_epochs(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, pbatch(0, epoch=3))
    expect_error(log, pbatch(2, epoch=2), ErrorCode.INVALID_PRODUCER_EPOCH)
    expect_error(log, pbatch(0, epoch=2), ErrorCode.INVALID_PRODUCER_EPOCH)
    expect_error(log, pbatch(5, epoch=4), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)  # new epoch: start at 0
    assert append(log, pbatch(0, epoch=4)) == (2, False)
    # A retry from the old epoch is not a duplicate any more: that epoch is fenced.
    expect_error(log, pbatch(0, epoch=3), ErrorCode.INVALID_PRODUCER_EPOCH)
    log.close()


def test_unknown_producer_may_start_anywhere(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert append(log, pbatch(500, pid=7)) == (0, False)
    assert append(log, pbatch(502, pid=7)) == (2, False)
    expect_error(log, pbatch(510, pid=7), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    log.close()


def test_producers_are_independent(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, pbatch(0, pid=1))
    append(log, pbatch(0, pid=2))
    assert append(log, pbatch(0, pid=1)) == (0, True)
    assert append(log, pbatch(0, pid=2)) == (2, True)
    assert append(log, pbatch(2, pid=2)) == (4, False)
    log.close()


def test_sequences_wrap_around(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, pbatch(INT32_MAX - 1, 2))
    assert append(log, pbatch(0, 2)) == (2, False)
    assert append(log, pbatch(INT32_MAX - 1, 2)) == (0, True)
    log.close()


def test_bad_batch_in_a_request_leaves_state_untouched(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, pbatch(0))
    # Second batch of the request has a gap: nothing of the request is written or remembered.
    expect_error(log, pbatch(2) + pbatch(9), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert append(log, pbatch(2)) == (2, False)
    # Several batches of one producer in one request are checked against each other.
    info = log.append_as_leader(pbatch(4) + pbatch(6), leader_epoch=0, now_ms=NOW)
    assert (info.first_offset, info.last_offset) == (4, 7)
    assert append(log, pbatch(6)) == (6, True)
    log.close()


def test_non_idempotent_batches_are_never_duplicates(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    plain = build_batch([NewRecord(b"x")])
    assert append(log, plain) == (0, False)
    assert append(log, plain) == (1, False)
    log.close()


def test_log_append_time_duplicate_reports_the_original_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    first = log.append_as_leader(pbatch(0), leader_epoch=0, now_ms=NOW + 5)
    again = log.append_as_leader(pbatch(0), leader_epoch=0, now_ms=NOW + 99)
    assert again.duplicate and again.log_append_time == first.log_append_time == NOW + 5
    log.close()


@pytest.mark.parametrize("how", ["clean", "crash", "crash-no-snapshot", "crash-bad-snapshot"])
def test_state_survives_restarts(tmp_path: Path, how: str) -> None:
    log = open_log(tmp_path, segment_bytes=600)
    offsets = {}
    for seq in range(0, 60, 2):
        offsets[seq] = append(log, pbatch(seq))[0]
    append(log, pbatch(0, pid=9, epoch=5))
    assert len(log.segments) > 3
    if how == "clean":
        log.close()
    else:
        crash(log)
        snapshots = [n for n in os.listdir(log.directory) if n.endswith(".producer-snapshot")]
        assert snapshots  # written at rolls
        for name in snapshots:
            if how == "crash-no-snapshot":
                (log.directory / name).unlink()
            elif how == "crash-bad-snapshot":
                data = bytearray((log.directory / name).read_bytes())
                data[-1] ^= 0xFF
                (log.directory / name).write_bytes(bytes(data))
    log = open_log(tmp_path, segment_bytes=600)
    for seq in range(50, 60, 2):
        assert append(log, pbatch(seq)) == (offsets[seq], True)
    expect_error(log, pbatch(64), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    expect_error(log, pbatch(2, pid=9, epoch=4), ErrorCode.INVALID_PRODUCER_EPOCH)
    assert append(log, pbatch(60)) == (62, False)
    log.close()


def test_torn_tail_forgets_the_lost_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, pbatch(0))
    append(log, pbatch(2))
    path = log.active_segment.log_path
    crash(log)
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 1)
    log = open_log(tmp_path)
    assert log.log_end_offset == 2
    # The lost batch is written again when the producer retries it: it is not a duplicate.
    assert append(log, pbatch(2)) == (2, False)
    log.close()


def test_truncation_rebuilds_producer_state(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    for seq in range(0, 20, 2):
        append(log, pbatch(seq))
    log.truncate_to(10)
    assert log.log_end_offset == 10
    assert append(log, pbatch(10)) == (10, False)
    assert append(log, pbatch(8)) == (8, True)
    log.close()


def test_idle_producers_expire(tmp_path: Path) -> None:
    log = open_log(tmp_path, producer_id_expiration_ms=1000, retention_ms=-1)
    append(log, pbatch(0, ts=NOW))
    log.maintenance(NOW + 500)
    assert append(log, pbatch(0, ts=NOW)) == (0, True)
    log.maintenance(NOW + 1000)
    assert PID not in log.producers.producers
    assert append(log, pbatch(40, ts=NOW)) == (2, False)  # unknown again: any sequence accepted
    log.close()


def test_follower_appends_update_state(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    data = build_batch(
        [NewRecord(b"a"), NewRecord(b"b")], base_offset=0, producer_id=PID, producer_epoch=0, base_sequence=0
    )
    log.append_as_follower(data)
    assert append(log, pbatch(0)) == (0, True)
    assert append(log, pbatch(2)) == (2, False)
    log.close()
