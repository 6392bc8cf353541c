"""Recovery after crashes: torn writes, garbage, lost or damaged indexes and checkpoints."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from riverlog.protocol.record_batch import NewRecord, build_batch, iter_records, read_header
from riverlog.storage.config import LogConfig
from riverlog.storage.log import Log

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000
CONFIG = {"segment_bytes": 1500, "index_interval_bytes": 200}


def batch(n: int, ts: int = NOW, **kw: int) -> bytes:
    return build_batch([NewRecord(b"value-%d" % i, None, (), ts + i) for i in range(n)], **kw)


def open_log(path: Path) -> Log:
    return Log.open(path / "t-0", LogConfig(**CONFIG), now_ms=NOW)


def crash(log: Log) -> None:
    """kill -9: drop the log without close(); only what reached the files remains."""
    for segment in log.segments:
        segment.offset_index.close_file()
        segment.time_index.close_file()
        segment.file.close()


def fill(log: Log, batches: int, per_batch: int = 3) -> None:
    for i in range(batches):
        log.append_as_leader(batch(per_batch, ts=NOW + i * 10), leader_epoch=1, now_ms=NOW)


def offsets(log: Log) -> list[int]:
    return [r.offset for _h, r in iter_records(log.read_records_bytes(log.log_start_offset, 1 << 30))]


def index_snapshot(log: Log) -> dict[str, bytes]:
    return {
        n: (log.directory / n).read_bytes()
        for n in sorted(os.listdir(log.directory))
        if n.endswith((".index", ".timeindex"))
    }


def last_log_file(log: Log) -> Path:
    return log.active_segment.log_path


def test_clean_shutdown_marker_life_cycle(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    marker = log.directory / ".riverlog-clean-shutdown"
    assert not marker.exists()
    fill(log, 3)
    log.close()
    assert marker.exists()
    log = open_log(tmp_path)
    assert not marker.exists()
    log.close()


def test_unclean_reopen_keeps_everything_written(tmp_path: Path) -> None:
    reference = Log.open(tmp_path / "reference", LogConfig(**CONFIG), now_ms=NOW)
    fill(reference, 40)
    reference.close()
    log = open_log(tmp_path)
    fill(log, 40)
    crash(log)
    log = open_log(tmp_path)
    assert log.log_end_offset == 120
    assert offsets(log) == list(range(120))
    log.close()
    assert index_snapshot(log) == index_snapshot(reference)


@pytest.mark.parametrize("cut", [1, 11, 12, 30, 60, 61, 62])
def test_torn_last_batch_is_cut_and_offsets_stay_contiguous(tmp_path: Path, cut: int) -> None:
    log = open_log(tmp_path)
    fill(log, 20)
    last_size = len(batch(3))
    path = last_log_file(log)
    crash(log)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - last_size + cut)  # a write that stopped inside the last batch
    log = open_log(tmp_path)
    assert log.log_end_offset == 57
    assert offsets(log) == list(range(57))
    assert path.stat().st_size == size - last_size
    info = log.append_as_leader(batch(2), leader_epoch=1, now_ms=NOW)
    assert info.first_offset == 57
    assert offsets(log) == list(range(59))
    log.close()


def test_garbage_after_the_last_batch_is_removed(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 10)
    path = last_log_file(log)
    crash(log)
    size = path.stat().st_size
    for garbage in (b"\x00" * 100, os.urandom(333), b"\xff" * 12):
        with open(path, "ab") as f:
            f.write(garbage)
        log = open_log(tmp_path)
        assert log.log_end_offset == 30
        assert path.stat().st_size == size
        crash(log)


def test_corrupt_batch_ends_the_log_and_later_segments_go(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 40)
    assert len(log.segments) >= 3
    second = log.segments[1]
    victim = second.base_offset + 6  # in the third batch of the second segment
    header = second.find_batch(victim, 200)
    assert header is not None
    position, cut_offset = header.position, header.base_offset
    crash(log)
    with open(second.log_path, "r+b") as f:  # flip a byte inside that batch's records
        f.seek(position + header.size - 3)
        byte = f.read(1)
        f.seek(position + header.size - 3)
        f.write(bytes([byte[0] ^ 0x40]))
    # Without a state file the recovery point is unknown, so every segment is validated.
    (log.directory / "partition-state.checkpoint").unlink()
    log = open_log(tmp_path)
    assert log.log_end_offset == cut_offset
    assert offsets(log) == list(range(cut_offset))
    assert [s.base_offset for s in log.segments][-1] == second.base_offset
    assert log.append_as_leader(batch(1), leader_epoch=1, now_ms=NOW).first_offset == cut_offset
    log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_deleted_index_files_are_rebuilt_identically(tmp_path: Path, clean: bool) -> None:
    log = open_log(tmp_path)
    fill(log, 40)
    log.close()
    expected = index_snapshot(log)
    log = open_log(tmp_path)
    if clean:
        log.close()
    else:
        crash(log)
    for name in expected:
        (log.directory / name).unlink()
    log = open_log(tmp_path)
    for offset in range(120):
        assert log.read(offset, 1, max_offset=120).first_offset == offset - offset % 3
    assert log.offset_for_timestamp(NOW + 200) == (60, NOW + 200, 1)
    log.close()
    assert index_snapshot(log) == expected


def test_damaged_index_of_an_old_segment_is_rebuilt_on_first_use(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 40)
    first = log.segments[0]
    log.close()
    index_path = first.offset_index.path
    good = index_path.read_bytes()
    assert len(good) >= 16
    # Whole entries, but pointing nowhere sensible (decreasing offsets, positions past the end).
    index_path.write_bytes(struct.pack(">ii", 50, 999_999) + struct.pack(">ii", 3, 10))
    log = open_log(tmp_path)
    assert offsets(log) == list(range(120))
    for offset in range(0, 30):
        assert log.read(offset, 1, max_offset=120).first_offset == offset - offset % 3
    log.close()
    assert index_path.read_bytes() == good


def test_torn_index_entry_is_ignored(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 12)
    index_path = log.active_segment.offset_index.path
    crash(log)
    with open(index_path, "ab") as f:
        f.write(b"\x00\x00\x01")  # part of an entry
    log = open_log(tmp_path)
    assert offsets(log) == list(range(36))
    assert index_path.stat().st_size % 8 == 0
    log.close()


def test_recovery_point_limits_the_scan(tmp_path: Path) -> None:
    """Segments below the flushed recovery point are trusted; later ones are validated."""
    log = open_log(tmp_path)
    fill(log, 20)
    log.flush()
    assert log.recovery_point == 60
    fill(log, 20)
    segments = [(s.base_offset, s.log_path) for s in log.segments]
    crash(log)
    # Damage the last batch of the newest segment: recovered. The flushed part stays intact.
    last = segments[-1][1]
    with open(last, "r+b") as f:
        f.truncate(last.stat().st_size - 5)
    log = open_log(tmp_path)
    assert log.log_end_offset == 117
    assert offsets(log) == list(range(117))
    assert log.recovery_point == 117
    log.close()


def test_recovery_rebuilds_time_index_and_max_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 30)
    crash(log)
    for name in os.listdir(log.directory):
        if name.endswith(".timeindex"):
            (log.directory / name).write_bytes(b"\x01" * 7)
    log = open_log(tmp_path)
    assert log.offset_for_timestamp(NOW + 151) == (46, NOW + 151, 1)
    assert log.max_timestamp_offset() == (89, NOW + 292, 1)
    log.close()


def test_leftover_files_are_cleaned_at_open(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 5)
    crash(log)
    junk = ["00000000000000000999.log.deleted", "00000000000000000777.index", "x.tmp", "a.swap"]
    for name in junk:
        (log.directory / name).write_bytes(b"junk")
    log = open_log(tmp_path)
    assert not any((log.directory / n).exists() for n in junk)
    assert offsets(log) == list(range(15))
    log.close()


def test_epoch_cache_rebuilt_when_checkpoint_is_lost(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for epoch in (1, 1, 3, 3, 3, 7):
        log.append_as_leader(batch(5), leader_epoch=epoch, now_ms=NOW)
    entries = list(log.epochs.entries)
    assert entries == [(1, 0), (3, 10), (7, 25)]
    crash(log)
    (log.directory / "leader-epoch-checkpoint").write_text("garbage")
    log = open_log(tmp_path)
    assert log.epochs.entries == entries
    log.close()


def test_epochs_after_a_torn_tail_are_dropped(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(5), leader_epoch=1, now_ms=NOW)
    log.append_as_leader(batch(5), leader_epoch=2, now_ms=NOW)
    path = last_log_file(log)
    crash(log)
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 1)
    log = open_log(tmp_path)
    assert log.log_end_offset == 5
    assert log.epochs.entries == [(1, 0)]
    assert log.end_offset_for_epoch(1) == (1, 5)
    log.close()


def test_empty_directory_and_empty_log_round_trip(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    crash(log)
    log = open_log(tmp_path)
    assert log.log_end_offset == 0
    log.close()
    log = open_log(tmp_path)
    assert log.log_end_offset == 0
    assert read_header(batch(1)).record_count == 1
    log.close()
