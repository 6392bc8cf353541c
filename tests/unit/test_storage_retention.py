"""Retention by time and size, DeleteRecords, and delayed deletion of segment files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from riverlog.protocol.errors import ErrorCode, KafkaError
from riverlog.protocol.record_batch import NewRecord, build_batch, iter_records
from riverlog.storage.config import LogConfig
from riverlog.storage.log import Log

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000
HOUR = 3600 * 1000


def batch(ts: int, n: int = 2) -> bytes:
    return build_batch([NewRecord(b"x" * 40, None, (), ts) for _ in range(n)])


def open_log(path: Path, **config: object) -> Log:
    config.setdefault("segment_bytes", 400)
    return Log.open(path / "t-0", LogConfig(**config), now_ms=NOW)


def fill(log: Log, count: int, ts_of: object = None) -> None:
    for i in range(count):
        ts = ts_of(i) if callable(ts_of) else NOW
        log.append_as_leader(batch(ts), leader_epoch=0, now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)


def offsets(log: Log, start: int | None = None) -> list[int]:
    begin = log.log_start_offset if start is None else start
    return [r.offset for _h, r in iter_records(log.read_records_bytes(begin, 1 << 30))]


def expect_out_of_range(log: Log, offset: int) -> None:
    with pytest.raises(KafkaError) as err:
        log.read(offset, 1000, max_offset=log.log_end_offset)
    assert err.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_retention_by_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, retention_ms=10 * HOUR)
    fill(log, 12, lambda i: NOW - 20 * HOUR if i < 6 else NOW)  # first half is old
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    old_segments = [s for s in log.segments if s.max_timestamp < NOW - 10 * HOUR]
    assert old_segments
    removed = log.apply_retention(NOW)
    assert removed == len(old_segments)
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert all(s.max_timestamp == NOW for s in log.segments)
    expect_out_of_range(log, log.log_start_offset - 1)
    assert offsets(log) == list(range(log.log_start_offset, 24))
    assert log.apply_retention(NOW) == 0
    log.close()
    log = open_log(tmp_path, retention_ms=10 * HOUR)
    assert log.log_start_offset == log.segments[0].base_offset
    log.close()


def test_retention_never_passes_the_high_watermark(tmp_path: Path) -> None:
    log = open_log(tmp_path, retention_ms=HOUR)
    fill(log, 12, lambda i: NOW - 5 * HOUR)
    log.update_high_watermark(8)
    log.apply_retention(NOW)
    assert log.log_start_offset <= 8
    for segment, following in zip(log.segments, log.segments[1:], strict=False):
        assert following.base_offset > 8 or segment is not log.segments[0]
    log.close()


def test_expired_active_segment_is_rolled_then_deleted(tmp_path: Path) -> None:
    log = open_log(tmp_path, retention_ms=HOUR, segment_bytes=1 << 20)
    fill(log, 3, lambda i: NOW - 2 * HOUR)
    assert len(log.segments) == 1
    assert log.apply_retention(NOW) == 1
    assert [s.base_offset for s in log.segments] == [6]
    assert (log.log_start_offset, log.log_end_offset) == (6, 6)
    assert log.read(6, 1000, max_offset=6).regions == []
    expect_out_of_range(log, 5)
    assert log.append_as_leader(batch(NOW), leader_epoch=0, now_ms=NOW).first_offset == 6
    log.close()


def test_retention_by_size(tmp_path: Path) -> None:
    log = open_log(tmp_path, retention_bytes=1000, retention_ms=-1)
    fill(log, 20)
    total = log.size_bytes()
    removed = log.apply_retention(NOW)
    assert removed > 0
    assert log.size_bytes() < total
    # Kafka's rule: delete oldest segments only while the excess covers the whole segment.
    assert 0 <= log.size_bytes() - 1000 < log.segments[0].size
    assert offsets(log) == list(range(log.log_start_offset, 40))
    log.close()


def test_compact_only_topics_keep_everything(tmp_path: Path) -> None:
    log = open_log(tmp_path, retention_ms=1, retention_bytes=1, cleanup_policy="compact")
    # Compacted logs only take keyed records (Kafka rejects keyless ones with INVALID_RECORD).
    for i in range(10):
        keyed = build_batch([NewRecord(b"x" * 40, f"k{i}-{j}".encode(), (), NOW - HOUR) for j in range(2)])
        log.append_as_leader(keyed, leader_epoch=0, now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)
    assert log.apply_retention(NOW) == 0
    assert log.log_start_offset == 0
    log.close()


def test_deleted_segments_linger_for_in_flight_reads(tmp_path: Path) -> None:
    log = open_log(tmp_path, retention_ms=HOUR, file_delete_delay_ms=60_000)
    fill(log, 12, lambda i: NOW - 2 * HOUR if i < 6 else NOW)
    region = log.read(0, 1 << 20, max_offset=24).regions[0]
    expected = os.pread(region.fileno(), region.size, region.position)
    first_name = log.segments[0].log_path.name
    log.apply_retention(NOW)
    names = os.listdir(log.directory)
    assert first_name not in names and first_name + ".deleted" in names
    # A response still sending from the old segment keeps working.
    assert os.pread(region.fileno(), region.size, region.position) == expected
    log.maintenance(NOW + 59_999)
    assert first_name + ".deleted" in os.listdir(log.directory)
    log.maintenance(NOW + 60_000)
    assert not any(n.endswith(".deleted") for n in os.listdir(log.directory))
    log.close()


def test_delete_records(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 12)
    log.update_high_watermark(20)
    segments_before = len(log.segments)
    second_base = log.segments[1].base_offset
    assert log.delete_records_before(second_base + 1) == second_base + 1
    assert len(log.segments) == segments_before - 1
    expect_out_of_range(log, second_base)
    info = log.read(second_base + 1, 1000, max_offset=20)
    assert info.first_offset == second_base  # the batch containing the new start
    assert offsets(log)[0] == second_base
    assert log.delete_records_before(3) == second_base + 1  # never moves back
    with pytest.raises(KafkaError) as err:
        log.delete_records_before(21)
    assert err.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert log.delete_records_before(-1) == 20  # -1: up to the high watermark
    assert log.offset_for_timestamp(0) == (20, NOW, 0)
    log.close()
    log = open_log(tmp_path)
    assert log.log_start_offset == 20
    expect_out_of_range(log, 19)
    log.close()


def test_delete_records_survives_a_crash(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 6)
    log.delete_records_before(7)
    # Crash: no close(). Segments awaiting deletion still hold their (renamed) files open.
    for segment in [*log.segments, *(s for s, _due in log._pending_deletion)]:
        segment.file.close()
    log = open_log(tmp_path)
    assert log.log_start_offset == 7
    log.close()


def test_delete_records_moves_the_epoch_cache_start(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for epoch in (1, 2, 3):
        log.append_as_leader(batch(NOW, 4), leader_epoch=epoch, now_ms=NOW)
    log.update_high_watermark(12)
    log.delete_records_before(6)
    assert log.epochs.entries == [(2, 6), (3, 8)]
    log.close()
