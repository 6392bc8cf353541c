"""Log: appends, reads, rolls, indexes and timestamp lookups."""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path

import pytest
from riverlog.protocol.errors import ErrorCode, KafkaError
from riverlog.protocol.record_batch import (
    Compression,
    NewRecord,
    build_batch,
    iter_records,
    read_header,
    validate_batch,
)
from riverlog.storage import checkpoint
from riverlog.storage.config import LogConfig
from riverlog.storage.log import Log

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000


def batch(n: int = 1, *, ts: int = NOW, value: bytes = b"v", codec: int = Compression.NONE, **kw: int) -> bytes:
    return build_batch([NewRecord(value, b"k%d" % i, (), ts + i) for i in range(n)], compression=codec, **kw)


def open_log(path: Path, **config: object) -> Log:
    return Log.open(path / "topic-0", LogConfig(**config), now_ms=NOW)


def read_offsets(log: Log, start: int = 0, max_bytes: int = 1 << 30, max_offset: int | None = None) -> list[int]:
    data = log.read_records_bytes(start, max_bytes, max_offset=max_offset)
    return [r.offset for _h, r in iter_records(data)]


def segment_files(log: Log, suffix: str) -> list[str]:
    return sorted(n for n in os.listdir(log.directory) if n.endswith(suffix))


def test_append_assigns_contiguous_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    info = log.append_as_leader(batch(3) + batch(2, codec=Compression.GZIP), leader_epoch=5, now_ms=NOW)
    assert (info.first_offset, info.last_offset, info.record_count, info.duplicate) == (0, 4, 5, False)
    assert info.log_append_time == -1
    assert info.max_timestamp == NOW + 2
    info = log.append_as_leader(batch(4), leader_epoch=5, now_ms=NOW)
    assert (info.first_offset, info.last_offset) == (5, 8)
    assert log.log_end_offset == 9
    assert read_offsets(log) == list(range(9))
    data = log.read_records_bytes(0, 1 << 20)
    for header, _record in iter_records(data):
        validate_batch(data, header)
        assert header.partition_leader_epoch == 5
    log.close()


def test_read_starts_at_the_batch_containing_the_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=100)
    for _ in range(20):
        log.append_as_leader(batch(5), leader_epoch=0, now_ms=NOW)
    for offset in range(100):
        info = log.read(offset, 1, max_offset=100)
        assert info.first_offset == offset - offset % 5
        assert len(info.regions) == 1
    assert log.read(100, 1000, max_offset=100).regions == []
    log.close()


def test_read_out_of_range(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(2), leader_epoch=0, now_ms=NOW)
    for bad in (-1, 3):
        with pytest.raises(KafkaError) as err:
            log.read(bad, 100, max_offset=2)
        assert err.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    empty = log.read(2, 100, max_offset=2)
    assert (empty.regions, empty.size, empty.first_offset) == ([], 0, -1)
    log.close()


def test_read_stops_before_batches_reaching_max_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400)
    for _ in range(10):
        log.append_as_leader(batch(3), leader_epoch=0, now_ms=NOW)
    assert len(log.segments) > 2
    assert read_offsets(log, 0, max_offset=7) == list(range(6))  # batch 6-8 straddles 7
    assert read_offsets(log, 0, max_offset=9) == list(range(9))
    assert read_offsets(log, 7, max_offset=9) == [6, 7, 8]
    assert read_offsets(log, 7, max_offset=8) == []
    assert read_offsets(log, 0) == list(range(30))
    log.close()


def test_read_max_bytes_is_batch_aligned_with_min_one_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=1)
    sizes = []
    for i in range(10):
        data = batch(2, value=b"x" * (50 + i))
        sizes.append(len(data))
        log.append_as_leader(data, leader_epoch=0, now_ms=NOW)
    info = log.read(0, sizes[0] - 1, max_offset=20)
    assert info.size == sizes[0] and info.first_offset == 0  # KIP-74: first batch even if too big
    assert log.read(0, sizes[0] - 1, max_offset=20, min_one_batch=False).regions == []
    budget = sizes[0] + sizes[1] + sizes[2] // 2
    info = log.read(0, budget, max_offset=20)
    assert info.size == sizes[0] + sizes[1]
    assert read_offsets(log, 0, budget) == [0, 1, 2, 3]
    info = log.read(4, sum(sizes[2:5]), max_offset=20)
    assert info.size == sum(sizes[2:5])
    log.close()


def test_reads_span_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    for _ in range(12):
        log.append_as_leader(batch(2), leader_epoch=0, now_ms=NOW)
    info = log.read(0, 1 << 20, max_offset=24)
    assert len(info.regions) == len(log.segments)
    assert read_offsets(log) == list(range(24))
    log.close()


def test_rolls_on_segment_bytes_with_kafka_file_names(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=500)
    for _ in range(30):
        log.append_as_leader(batch(2), leader_epoch=0, now_ms=NOW)
    names = segment_files(log, ".log")
    assert len(names) > 3
    bases = [int(n[:-4]) for n in names]
    assert all(len(n) == 24 for n in names)
    assert bases == [s.base_offset for s in log.segments]
    for segment, following in zip(log.segments, log.segments[1:], strict=False):
        assert segment.size <= 500
        assert segment.next_offset == following.base_offset
    assert read_offsets(log) == list(range(60))
    log.close()
    assert segment_files(log, ".index") == [n[:-4] + ".index" for n in names]
    assert segment_files(log, ".timeindex") == [n[:-4] + ".timeindex" for n in names]


def check_index_files(log: Log) -> None:
    """Every .index entry points at a batch whose last offset it names; .timeindex grows."""
    for name in segment_files(log, ".log"):
        base = int(name[:-4])
        data = (log.directory / name).read_bytes()
        index = (log.directory / f"{base:020d}.index").read_bytes()
        assert len(index) % 8 == 0
        previous = -1
        for rel, pos in struct.iter_unpack(">ii", index):
            header = read_header(data, pos)
            assert header.last_offset == base + rel
            assert pos > previous
            previous = pos
        times = list(struct.iter_unpack(">qi", (log.directory / f"{base:020d}.timeindex").read_bytes()))
        assert [t for t, _ in times] == sorted({t for t, _ in times})
        for ts, rel in times:
            assert ts >= 0 and rel >= 0


def test_index_files_are_sparse_and_in_kafka_format(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=300, segment_bytes=5000)
    for i in range(60):
        log.append_as_leader(batch(2, ts=NOW + i * 10), leader_epoch=0, now_ms=NOW)
    total_entries = sum(len(s.offset_index) for s in log.segments)
    assert 0 < total_entries < 60
    check_index_files(log)
    log.close()
    check_index_files(log)


def test_lookups_after_clean_reopen(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=200, segment_bytes=2000)
    for i in range(50):
        log.append_as_leader(batch(3, ts=NOW + i * 100), leader_epoch=1, now_ms=NOW)
    expected_ts = {o: log.offset_for_timestamp(NOW + o * 33) for o in range(0, 150, 7)}
    log.close()
    log = open_log(tmp_path, index_interval_bytes=200, segment_bytes=2000)
    assert log.log_end_offset == 150
    for offset in range(150):
        assert log.read(offset, 1, max_offset=150).first_offset == offset - offset % 3
    assert {o: log.offset_for_timestamp(NOW + o * 33) for o in range(0, 150, 7)} == expected_ts
    info = log.append_as_leader(batch(1), leader_epoch=1, now_ms=NOW)
    assert info.first_offset == 150
    assert read_offsets(log) == list(range(151))
    log.close()


def test_offset_for_timestamp_finds_the_first_record_at_or_after(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=1, segment_bytes=1000)
    # Batches of 4 records; record timestamps 10 apart, one out-of-order batch, some compressed.
    timestamps: list[int] = []
    for b in range(20):
        ts = [1000 + (b * 4 + i) * 10 for i in range(4)]
        if b == 7:
            ts = [t - 500 for t in ts]
        records = [NewRecord(b"v", None, (), t) for t in ts]
        log.append_as_leader(build_batch(records, compression=b % 3), leader_epoch=2, now_ms=NOW)
        timestamps.extend(ts)
    for target in range(900, 1900, 7):
        expected = next(((o, t) for o, t in enumerate(timestamps) if t >= target), None)
        found = log.offset_for_timestamp(target)
        assert (found[:2] if found else None) == expected, target
        if found:
            assert found[2] == 2
    assert log.offset_for_timestamp(10**15) is None
    assert log.offset_for_timestamp(1290, max_offset=5) is None
    log.close()


def test_max_timestamp_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    assert log.max_timestamp_offset() is None
    stamps = [[5, 9], [30, 2], [7, 30], [1, 1]]
    for ts in stamps:
        log.append_as_leader(build_batch([NewRecord(b"v", None, (), t) for t in ts]), leader_epoch=3, now_ms=NOW)
    assert log.max_timestamp_offset() == (2, 30, 3)  # the first record with the largest timestamp
    log.close()
    log = open_log(tmp_path, segment_bytes=300)
    assert log.max_timestamp_offset() == (2, 30, 3)
    log.close()


def test_log_append_time_topics(tmp_path: Path) -> None:
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    info = log.append_as_leader(batch(3, ts=5, codec=Compression.SNAPPY), leader_epoch=0, now_ms=NOW + 42)
    assert info.log_append_time == NOW + 42
    assert info.max_timestamp == NOW + 42
    data = log.read_records_bytes(0, 1 << 20)
    header = read_header(data)
    validate_batch(data, header)
    assert header.is_log_append_time and header.max_timestamp == NOW + 42
    assert [r.timestamp for _h, r in iter_records(data)] == [NOW + 42] * 3
    assert log.offset_for_timestamp(NOW + 40) == (0, NOW + 42, 0)
    assert log.offset_for_timestamp(6) == (0, NOW + 42, 0)
    log.close()


def test_invalid_batch_rejects_the_whole_request(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(1), leader_epoch=0, now_ms=NOW)
    corrupt = bytearray(batch(2))
    corrupt[-1] ^= 0xFF
    for payload, code in (
        (batch(2) + bytes(corrupt), ErrorCode.CORRUPT_MESSAGE),
        (batch(2) + batch(1)[:-4], ErrorCode.CORRUPT_MESSAGE),
        (batch(1, value=b"x" * 2000), ErrorCode.MESSAGE_TOO_LARGE),
    ):
        log.config = LogConfig(max_message_bytes=1000)
        with pytest.raises(KafkaError) as err:
            log.append_as_leader(payload, leader_epoch=0, now_ms=NOW)
        assert err.value.code == code
    assert log.log_end_offset == 1
    assert log.active_segment.size == len(batch(1))
    assert read_offsets(log) == [0]
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(build_batch([NewRecord(b"c")], control=True), leader_epoch=0, now_ms=NOW)
    assert err.value.code == ErrorCode.INVALID_RECORD
    log.close()


def test_request_larger_than_a_segment_is_too_large(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=200)
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(batch(3) + batch(3) + batch(3), leader_epoch=0, now_ms=NOW)
    assert err.value.code == ErrorCode.MESSAGE_TOO_LARGE
    log.close()


def test_caller_buffer_is_patched_in_place_only_if_writable(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(1), leader_epoch=0, now_ms=NOW)
    original = batch(2)
    frozen = bytes(original)
    log.append_as_leader(frozen, leader_epoch=0, now_ms=NOW)
    assert frozen == original
    writable = bytearray(original)
    log.append_as_leader(memoryview(writable), leader_epoch=0, now_ms=NOW)
    assert read_header(writable).base_offset == 3
    log.close()


def test_roll_on_segment_ms_uses_record_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_ms=1000)
    log.append_as_leader(batch(1, ts=NOW), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(batch(1, ts=NOW + 1000), leader_epoch=0, now_ms=NOW)
    assert len(log.segments) == 1
    log.append_as_leader(batch(1, ts=NOW + 1001), leader_epoch=0, now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_maintenance_rolls_an_idle_expired_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_ms=1000, retention_ms=-1)
    log.maintenance(NOW + 5000)  # empty active segment: nothing to roll
    assert len(log.segments) == 1
    log.append_as_leader(batch(2, ts=NOW), leader_epoch=0, now_ms=NOW)
    log.maintenance(NOW + 500)
    assert len(log.segments) == 1
    log.maintenance(NOW + 1002)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_roll_when_index_is_full(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_index_bytes=24, index_interval_bytes=1)
    for _ in range(12):
        log.append_as_leader(batch(1), leader_epoch=0, now_ms=NOW)
    assert len(log.segments) > 2
    assert all(len(s.offset_index) <= 3 for s in log.segments)
    assert read_offsets(log) == list(range(12))
    log.close()


def test_roll_when_relative_offsets_would_overflow(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_follower(batch(2, base_offset=0, partition_leader_epoch=0))
    far = 2**31 + 10
    log.append_as_follower(batch(2, base_offset=far, partition_leader_epoch=0))
    assert [s.base_offset for s in log.segments] == [0, far]
    assert log.log_end_offset == far + 2
    assert read_offsets(log, 0) == [0, 1, far, far + 1]
    assert log.read(5, 100, max_offset=far + 2).first_offset == far
    log.close()
    log = open_log(tmp_path)
    assert log.log_end_offset == far + 2
    log.close()


def test_follower_append_keeps_offsets_and_rejects_going_back(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    data = batch(3, base_offset=0, partition_leader_epoch=4)
    info = log.append_as_follower(data)
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert log.read_records_bytes(0, 1 << 20) == data
    with pytest.raises(KafkaError) as err:
        log.append_as_follower(batch(1, base_offset=2, partition_leader_epoch=4))
    assert err.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    corrupt = bytearray(batch(1, base_offset=3))
    corrupt[-1] ^= 1
    with pytest.raises(KafkaError):
        log.append_as_follower(bytes(corrupt))
    assert log.log_end_offset == 3
    assert log.latest_epoch() == 4
    log.close()


def test_truncate_to(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400, index_interval_bytes=50)
    for _ in range(20):
        log.append_as_leader(batch(2), leader_epoch=0, now_ms=NOW)
    log.update_high_watermark(40)
    log.truncate_to(17)  # inside the batch 16-17: the whole batch goes
    assert log.log_end_offset == 16
    assert log.high_watermark == 16
    assert read_offsets(log) == list(range(16))
    assert log.append_as_leader(batch(1), leader_epoch=1, now_ms=NOW).first_offset == 16
    check_index_files(log)
    log.close()
    log = open_log(tmp_path, segment_bytes=400, index_interval_bytes=50)
    assert read_offsets(log) == list(range(17))
    log.truncate_to(0)
    assert log.log_end_offset == 0 and read_offsets(log) == []
    log.close()


def test_high_watermark_is_clamped_and_persisted(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(5), leader_epoch=0, now_ms=NOW)
    assert log.update_high_watermark(100) == 5
    assert log.update_high_watermark(3) == 3
    log.flush()
    log.close()
    log = open_log(tmp_path)
    assert log.high_watermark == 3
    log.close()


def test_size_and_delete(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    total = 0
    for _ in range(10):
        data = batch(2)
        total += len(data)
        log.append_as_leader(data, leader_epoch=0, now_ms=NOW)
    assert log.size_bytes() == total
    directory = log.directory
    log.delete()
    assert not directory.exists()


def test_flush_messages_signal(tmp_path: Path) -> None:
    log = open_log(tmp_path, flush_messages=5)
    log.append_as_leader(batch(3), leader_epoch=0, now_ms=NOW)
    assert not log.needs_flush
    log.append_as_leader(batch(3), leader_epoch=0, now_ms=NOW)
    assert log.needs_flush
    log.flush()
    assert not log.needs_flush
    log.close()


def test_config_from_topic_configs() -> None:
    config = LogConfig.from_topic_configs(
        {
            "segment.bytes": "1000",
            "message.timestamp.type": "LogAppendTime",
            "cleanup.policy": "compact,delete",
            "unknown.key": "x",
            "flush.messages": "10",
        }
    )
    assert config.segment_bytes == 1000 and config.log_append_time and config.deletes
    assert config.flush_messages == 10
    assert not LogConfig(cleanup_policy="compact").deletes


def test_flush_from_another_thread_while_appending(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=2000)
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            while not stop.is_set():
                log.flush()
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for _ in range(300):
            log.append_as_leader(batch(2), leader_epoch=0, now_ms=NOW)
    finally:
        stop.set()
        thread.join()
    assert errors == []
    log.flush()
    assert log.recovery_point == 600
    for segment in log.segments:  # crash: no close()
        segment.offset_index.close_file()
        segment.time_index.close_file()
        segment.file.close()
    log = open_log(tmp_path, segment_bytes=2000)
    assert read_offsets(log) == list(range(600))
    log.close()


def test_flush_of_an_idle_log_syncs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A flush with nothing new since the last one costs no fsync and rewrites no state file;
    the next append is synced again and moves the recovery point (10,000 idle partitions made
    the periodic flush 60,000 fsyncs a minute)."""
    log = open_log(tmp_path, segment_bytes=400)
    for _ in range(5):  # a few rolls: segments, snapshots and epochs to sync
        log.append_as_leader(batch(4), leader_epoch=1, now_ms=NOW)
    log.flush()
    assert log.recovery_point == 20
    state = log.directory / checkpoint.STATE_NAME
    written = {p.name: p.stat().st_mtime_ns for p in log.directory.iterdir()}
    fsyncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    log.flush()
    assert fsyncs == []
    assert {p.name: p.stat().st_mtime_ns for p in log.directory.iterdir()} == written
    log.append_as_leader(batch(2), leader_epoch=1, now_ms=NOW)
    log.flush()
    assert fsyncs != [] and log.recovery_point == 22
    assert state.stat().st_mtime_ns != written[state.name]
    assert checkpoint.read_state(log.directory).recovery_point == 22
    log.close()


def descriptors_under(directory: Path) -> list[str]:
    """This process's open descriptors on files under ``directory``."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since the listing
            continue
        if target.startswith(str(directory) + os.sep):
            out.append(target)
    return out


def test_a_new_idle_log_holds_one_file_descriptor(tmp_path: Path) -> None:
    """Its segment file only: the empty indexes take a descriptor at their first entry (three per
    partition ran 10,000 partitions into the usual open-files limit)."""
    logs = [open_log(tmp_path / str(i)) for i in range(20)]
    # Only this test's files are counted: descriptors of earlier tests' objects may be closed by
    # the garbage collector meanwhile, so a count of every open descriptor is not stable.
    assert len(descriptors_under(tmp_path)) == 20
    for log in logs:
        log.close()


def test_leading_a_new_partition_costs_no_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its first leader epoch protects no record: the next flush syncs nothing. Once records
    arrive under an epoch, the epoch file is synced with them."""
    log = open_log(tmp_path)
    log.assign_epoch(0, 0)
    fsyncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    log.flush()
    assert fsyncs == []
    log.append_as_leader(batch(2), leader_epoch=1, now_ms=NOW)
    log.assign_epoch(2, log.log_end_offset)
    assert log.epochs.flush()  # a leader change over records: durable at the next flush
    log.close()


def test_the_epoch_of_a_new_partition_is_synced_with_its_first_durable_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The leader epoch written while the log was empty needs no fsync of its own, but once a
    flush makes records durable (and moves the recovery point over them) the epoch file they
    were written under must be durable too: recovery trusts both below the recovery point."""
    from riverlog.storage import epoch_cache

    log = open_log(tmp_path)
    log.assign_epoch(3, 0)
    synced_paths: list[Path] = []
    real = epoch_cache.fsync_path
    monkeypatch.setattr(epoch_cache, "fsync_path", lambda path: (synced_paths.append(path), real(path))[1])
    log.flush()
    assert synced_paths == []  # nothing depends on it yet
    log.append_as_leader(batch(2), leader_epoch=3, now_ms=NOW)
    log.flush()
    assert synced_paths == [log.epochs.path] and log.recovery_point == 2
    log.flush()
    assert synced_paths == [log.epochs.path]  # and only once
    log.close()
