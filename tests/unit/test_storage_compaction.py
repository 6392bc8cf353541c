"""Log compaction (storage/cleaner.py): latest value per key at its original offset.

Logs are written with many updates of a few keys (and tombstones) across many small segments,
cleaned with an injected clock, then read back through the same paths fetches use.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import random
import threading
from pathlib import Path
from typing import Any

import pytest
from riverlog.cluster.log_cleaner import LogCleaner
from riverlog.config import BrokerConfig
from riverlog.protocol.errors import ErrorCode, KafkaError
from riverlog.protocol.record_batch import (
    Compression,
    NewRecord,
    build_batch,
    decode_records,
    iter_batches,
    iter_records,
    read_header,
    validate_batch,
)
from riverlog.storage import checkpoint
from riverlog.storage import cleaner as cleaner_module
from riverlog.storage.cleaner import CleanAborted, clean, cleanable_range
from riverlog.storage.config import LogConfig
from riverlog.storage.log import Log
from riverlog.storage.segment import LogSegment

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000
HOUR = 3600 * 1000
DELETE_RETENTION = 10 * 60 * 1000
KEYS = [f"key-{i:02d}".encode() for i in range(16)]

# (offset, key, value) as read back
Entry = tuple[int, bytes | None, bytes | None]


def open_log(path: Path, **config: Any) -> Log:
    config.setdefault("segment_bytes", 2048)
    config.setdefault("index_interval_bytes", 256)
    config.setdefault("cleanup_policy", "compact")
    config.setdefault("delete_retention_ms", DELETE_RETENTION)
    config.setdefault("file_delete_delay_ms", 0)
    return Log.open(path / "t-0", LogConfig(**config), now_ms=NOW)


def value_for(key: bytes, n: int) -> bytes:
    # Some entropy so compressed batches are not trivially tiny; the prefix identifies the write.
    return b"%s@%d:" % (key, n) + hashlib.sha256(b"%s%d" % (key, n)).hexdigest().encode()


def write_updates(
    log: Log, count: int, *, codec: int = Compression.NONE, seed: int = 7, tombstone_every: int = 9,
    start: int = 0, ts: int = NOW,
) -> None:
    """``count`` records over KEYS in batches of 1-5; every ``tombstone_every``-th is a delete."""
    rng = random.Random(seed)
    n = start
    while n < start + count:
        size = min(rng.randint(1, 5), start + count - n)
        records = []
        for i in range(n, n + size):
            key = KEYS[rng.randrange(len(KEYS))]
            value = None if tombstone_every and i % tombstone_every == tombstone_every - 1 else value_for(key, i)
            records.append(NewRecord(value, key, (("h", b"%d" % i),), ts + i))
        log.append_as_leader(build_batch(records, compression=codec), leader_epoch=3, now_ms=NOW)
        n += size
    log.roll(NOW)  # everything written becomes cleanable
    log.update_high_watermark(log.log_end_offset)


def read_all(log: Log) -> list[Entry]:
    data = log.read_records_bytes(log.log_start_offset, 1 << 30)
    return [(r.offset, r.key, r.value) for _h, r in iter_records(data)]


def latest(entries: list[Entry], *, tombstones: bool = True) -> dict[bytes | None, tuple[int, bytes | None]]:
    out: dict[bytes | None, tuple[int, bytes | None]] = {}
    for offset, key, value in entries:
        out[key] = (offset, value)
    return {k: v for k, v in out.items() if tombstones or v[1] is not None}


def assert_compacted(log: Log, expected: dict[bytes | None, tuple[int, bytes | None]]) -> None:
    entries = read_all(log)
    offsets = [o for o, _k, _v in entries]
    assert offsets == sorted(set(offsets)), "offsets must strictly increase"
    assert len(entries) == len(expected), "exactly one record per key"
    assert {k: (o, v) for o, k, v in entries} == expected


def assert_batches_valid(log: Log, codec: int | None = None) -> None:
    """Every stored batch passes the CRC check; non-empty rewritten ones kept their codec."""
    for segment in log.segments:
        previous_end = -1
        for header in segment.iter_headers(0):
            data = segment.read_bytes(header.position, header.size)
            validate_batch(data, read_header(data), compacted=True)
            assert header.base_offset > previous_end
            previous_end = header.last_offset
            if codec is not None and header.record_count > 0 and not header.is_control:
                assert header.compression == codec


def assert_lookups(log: Log, expected: dict[bytes | None, tuple[int, bytes | None]]) -> None:
    """A fetch from each kept offset starts with the batch holding it (the offset index at work),
    and a fetch from an offset compacted away starts at the next kept record."""
    kept = sorted(o for o, _v in expected.values())
    by_offset = {o: v for o, v in expected.values()}
    for offset in kept:
        data = log.read_records_bytes(offset, 1)
        first = next(iter_batches(data))
        assert first.base_offset <= offset <= first.last_offset
        records = {r.offset: r.value for r in decode_records(data, first)}
        assert records[offset] == by_offset[offset]
    gaps = [o for o in range(kept[0], kept[-1]) if o not in by_offset]
    for offset in gaps[:: max(1, len(gaps) // 40)]:
        following = min(o for o in kept if o > offset)
        seen = [r.offset for _h, r in iter_records(log.read_records_bytes(offset, 1 << 20)) if r.offset >= offset]
        assert seen[0] == following


def cleaned_files(log: Log) -> list[str]:
    return sorted(n for n in os.listdir(log.directory) if n.endswith((".cleaned", ".swap", ".swap-range")))


# --------------------------------------------------------------------------- core behaviour


@pytest.mark.parametrize("codec", list(Compression), ids=[c.name.lower() for c in Compression])
def test_latest_value_per_key_at_its_original_offset(tmp_path: Path, codec: Compression) -> None:
    log = open_log(tmp_path)
    write_updates(log, 600, codec=codec)
    before = read_all(log)
    expected = latest(before)
    segments_before = len(log.segments)
    size_before = log.size_bytes()
    assert segments_before >= 4

    stats = clean(log, NOW)
    assert stats is not None and stats.records_read == 600
    assert stats.clean_offset == log.active_segment.base_offset == 600

    assert_compacted(log, expected)  # tombstones stay for delete.retention.ms
    assert_batches_valid(log, codec)
    assert_lookups(log, expected)
    assert log.log_start_offset == 0 and log.log_end_offset == 600
    assert len(log.segments) < segments_before, "small cleaned segments are merged"
    assert log.size_bytes() < size_before / 4
    assert cleaned_files(log) == []
    # Header names, values and timestamps of kept records are unchanged.
    originals = {o: (k, v) for o, k, v in before}
    data = log.read_records_bytes(0, 1 << 30)
    for _h, record in iter_records(data):
        assert originals[record.offset] == (record.key, record.value)
        assert record.timestamp == NOW + record.offset
        assert record.headers == (("h", b"%d" % record.offset),)

    # The same after a clean restart, and after one that has to rebuild every index.
    log.close()
    log = open_log(tmp_path)
    assert_compacted(log, expected)
    assert_lookups(log, expected)
    log.close()
    for name in os.listdir(log.directory):
        if name.endswith((".index", ".timeindex")):
            os.unlink(log.directory / name)
    log = open_log(tmp_path)
    assert_lookups(log, expected)
    log.close()


def test_second_pass_compacts_new_updates_against_the_clean_section(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    write_updates(log, 300, seed=1)
    clean(log, NOW)
    write_updates(log, 300, seed=2, start=300)
    expected = latest(read_all(log))
    state = cleanable_range(log, NOW)
    assert state is not None and state.first_dirty == 300 and state.dirty_bytes > state.clean_bytes
    stats = clean(log, NOW)
    assert stats is not None and stats.clean_offset == 600
    assert_compacted(log, expected)
    assert_batches_valid(log)
    # Nothing dirty is left: the scheduler would not pick this log again.
    state = cleanable_range(log, NOW)
    assert state is not None and state.dirty_bytes == 0 and not state.should_clean(0.0)
    log.close()


def test_tombstones_removed_only_after_delete_retention(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    write_updates(log, 400, codec=Compression.LZ4)
    everything = latest(read_all(log))
    deleted = {k for k, (_o, v) in everything.items() if v is None}
    assert deleted, "the data set must end some keys with a tombstone"

    clean(log, NOW)
    assert_compacted(log, everything)
    saved = checkpoint.read_cleaner_state(log.directory)
    assert saved is not None and saved.delete_horizon == NOW + DELETE_RETENTION

    almost = NOW + DELETE_RETENTION - 1
    state = cleanable_range(log, almost)
    assert state is not None and not state.should_clean(0.5)
    clean(log, almost)  # a pass before the horizon keeps them
    assert_compacted(log, everything)
    assert_batches_valid(log, Compression.LZ4)

    due = NOW + DELETE_RETENTION
    state = cleanable_range(log, due)
    assert state is not None and state.delete_horizon_due and state.should_clean(0.5)
    clean(log, due)
    assert_compacted(log, latest(read_all(log), tombstones=False))
    assert_compacted(log, {k: v for k, v in everything.items() if k not in deleted})
    saved = checkpoint.read_cleaner_state(log.directory)
    assert saved is not None and saved.delete_horizon == checkpoint.NO_HORIZON
    assert_batches_valid(log, Compression.LZ4)
    log.close()


def test_tombstone_keeps_its_horizon_across_passes(tmp_path: Path) -> None:
    """A tombstone's retention starts when it is first cleaned, not at each later pass."""
    log = open_log(tmp_path)
    write_updates(log, 200, seed=3)
    clean(log, NOW)
    write_updates(log, 200, seed=4, start=200, tombstone_every=0)
    clean(log, NOW + DELETE_RETENTION // 2)  # new data, cleaned mid-way through the retention
    kept_tombstones = [o for o, _k, v in read_all(log) if v is None]
    clean(log, NOW + DELETE_RETENTION)
    remaining = {o for o, _k, _v in read_all(log)}
    assert not remaining & set(kept_tombstones)
    log.close()


def test_keyless_records_rejected_on_compacted_logs(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    keyed = NewRecord(b"v", b"k", (), NOW)
    for codec in (Compression.NONE, Compression.ZSTD):
        with pytest.raises(KafkaError) as err:
            log.append_as_leader(build_batch([keyed, NewRecord(b"v", None, (), NOW)], compression=codec),
                                 leader_epoch=0, now_ms=NOW)
        assert err.value.code == ErrorCode.INVALID_RECORD
        assert "without key" in err.value.message
    assert log.log_end_offset == 0
    log.append_as_leader(build_batch([keyed]), leader_epoch=0, now_ms=NOW)
    log.close()
    plain = open_log(tmp_path / "plain", cleanup_policy="delete")
    plain.append_as_leader(build_batch([NewRecord(b"v", None, (), NOW)]), leader_epoch=0, now_ms=NOW)
    plain.close()


def test_keyless_records_from_before_compaction_are_dropped(tmp_path: Path) -> None:
    log = open_log(tmp_path, cleanup_policy="delete")
    for i in range(40):
        log.append_as_leader(build_batch([NewRecord(b"%d" % i, None if i % 2 else b"k%d" % (i % 4), (), NOW)]),
                             leader_epoch=0, now_ms=NOW)
    log.roll(NOW)
    log.update_high_watermark(log.log_end_offset)
    log.config = dataclasses.replace(log.config, cleanup_policy="compact")
    clean(log, NOW)
    assert [(o, k) for o, k, _v in read_all(log)] == [(36, b"k0"), (38, b"k2")]
    log.close()


# --------------------------------------------------------------------------- what may be cleaned


def test_active_segment_and_data_above_the_high_watermark_are_not_cleaned(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    write_updates(log, 300)
    rolled_at = log.active_segment.base_offset
    for i in range(20):  # all in the active segment
        log.append_as_leader(build_batch([NewRecord(b"active-%d" % i, KEYS[0], (), NOW)]), leader_epoch=0,
                             now_ms=NOW)
    hw = log.segments[len(log.segments) // 2].base_offset
    log.update_high_watermark(hw)
    stats = clean(log, NOW)
    assert stats is not None and stats.clean_offset <= hw
    entries = read_all(log)
    assert [o for o, _k, _v in entries if o >= stats.clean_offset] == list(range(stats.clean_offset, 320))
    assert sum(1 for _o, k, v in entries if k == KEYS[0] and v and v.startswith(b"active-")) == 20
    log.update_high_watermark(log.log_end_offset)
    stats = clean(log, NOW)
    assert stats is not None and stats.clean_offset == rolled_at  # the active segment stays dirty
    log.close()


def test_dirty_ratio_and_compaction_lags(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    write_updates(log, 300, ts=NOW - 2 * HOUR)
    state = cleanable_range(log, NOW)
    assert state is not None and state.clean_bytes == 0 and state.dirty_ratio == 1.0
    assert state.should_clean(0.5) and not state.must_clean

    # min.compaction.lag.ms: segments with records younger than the lag wait.
    young = dataclasses.replace(log.config, min_compaction_lag_ms=3 * HOUR)
    log.config = young
    state = cleanable_range(log, NOW)
    assert state is not None and state.dirty_bytes == 0 and state.first_uncleanable == 0
    assert clean(log, NOW) is None
    log.config = dataclasses.replace(young, min_compaction_lag_ms=HOUR)
    clean(log, NOW)

    # A little more data: below the ratio; max.compaction.lag.ms forces a clean anyway.
    write_updates(log, 6, start=300, ts=NOW - 2 * HOUR)
    state = cleanable_range(log, NOW)
    assert state is not None and 0 < state.dirty_ratio < 0.5 and not state.should_clean(0.5)
    log.config = dataclasses.replace(log.config, max_compaction_lag_ms=HOUR)
    state = cleanable_range(log, NOW)
    assert state is not None and state.must_clean and state.should_clean(0.5)
    log.close()


def test_max_compaction_lag_rolls_the_active_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1 << 20, max_compaction_lag_ms=HOUR)
    log.append_as_leader(build_batch([NewRecord(b"v", b"k", (), NOW)]), leader_epoch=0, now_ms=NOW)
    log.maintenance(NOW + HOUR // 2)
    assert len(log.segments) == 1
    log.maintenance(NOW + 2 * HOUR)
    assert len(log.segments) == 2 and log.segments[0].size > 0
    log.close()


def test_offset_map_budget_cleans_in_several_passes(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    rng = random.Random(5)
    for i in range(400):  # many distinct keys: the map fills
        key = b"distinct-%d" % rng.randrange(200)
        log.append_as_leader(build_batch([NewRecord(value_for(key, i), key, (), NOW)]), leader_epoch=0, now_ms=NOW)
    log.roll(NOW)
    log.update_high_watermark(log.log_end_offset)
    expected = latest(read_all(log))
    passes = 0
    while True:
        stats = clean(log, NOW, dedupe_buffer_size=4000)
        assert stats is not None
        passes += 1
        if stats.clean_offset == 400:
            break
        assert passes < 50
    assert passes > 1
    assert_compacted(log, expected)
    log.close()


# --------------------------------------------------------------------------- producers


def test_last_batch_of_each_producer_survives_as_an_empty_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    pid, epoch = 4242, 1

    def pbatch(seq: int, keys: list[bytes]) -> bytes:
        return build_batch([NewRecord(b"p%d" % (seq + i), k, (), NOW) for i, k in enumerate(keys)],
                           producer_id=pid, producer_epoch=epoch, base_sequence=seq, compression=Compression.GZIP)

    seq = 0
    for _ in range(10):
        log.append_as_leader(pbatch(seq, KEYS[:3]), leader_epoch=0, now_ms=NOW)
        seq += 3
    last = pbatch(seq - 3, KEYS[:3])
    # Another writer supersedes every key the producer wrote.
    write_updates(log, 200, tombstone_every=0)
    last_offset = 29
    clean(log, NOW)

    empties = [h for s in log.segments for h in s.iter_headers(0) if h.record_count == 0]
    assert [(h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset) for h in empties] == [
        (pid, epoch, seq - 3, last_offset)]
    assert all(k not in (None,) for _o, k, _v in read_all(log))
    assert not any(v is not None and v.startswith(b"p") for _o, _k, v in read_all(log))

    def check_producer(log: Log) -> None:
        dup = log.append_as_leader(last, leader_epoch=0, now_ms=NOW)
        assert dup.duplicate and (dup.first_offset, dup.last_offset) == (last_offset - 2, last_offset)
        with pytest.raises(KafkaError) as err:
            log.append_as_leader(pbatch(seq + 5, KEYS[:1]), leader_epoch=0, now_ms=NOW)
        assert err.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

    check_producer(log)
    # Producer state rebuilt from the cleaned log alone (no snapshot) still knows the sequence.
    log.close()
    for name in os.listdir(log.directory):
        if name.endswith(".producer-snapshot"):
            os.unlink(log.directory / name)
    log = open_log(tmp_path)
    check_producer(log)
    info = log.append_as_leader(pbatch(seq, KEYS[:1]), leader_epoch=0, now_ms=NOW)
    assert not info.duplicate
    log.close()


def test_follower_accepts_compacted_batches(tmp_path: Path) -> None:
    leader = open_log(tmp_path)
    write_updates(leader, 300, codec=Compression.SNAPPY)
    clean(leader, NOW)
    expected = read_all(leader)
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(leader.read_records_bytes(0, 1 << 30), now_ms=NOW)
    assert read_all(follower) == expected and follower.log_end_offset == 300
    follower.close()
    follower = open_log(tmp_path / "follower")  # and recovery keeps it all
    assert read_all(follower) == expected
    leader.close()
    follower.close()


# --------------------------------------------------------------------------- concurrency


def test_reads_and_appends_during_a_clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(tmp_path, file_delete_delay_ms=60_000)
    write_updates(log, 300)
    region = log.read(0, 1 << 20, max_offset=300).regions[0]
    before = os.pread(region.fileno(), region.size, region.position)

    original = cleaner_module._filter_batch
    appended: list[int] = []

    def filter_and_append(*args: Any, **kwargs: Any) -> Any:
        if not appended:  # mid-pass, as the event loop would: an append to the active segment
            info = log.append_as_leader(build_batch([NewRecord(b"during", b"during", (), NOW)]), leader_epoch=0,
                                        now_ms=NOW)
            appended.append(info.first_offset)
            assert read_all(log)[-1] == (info.first_offset, b"during", b"during")
        return original(*args, **kwargs)

    monkeypatch.setattr(cleaner_module, "_filter_batch", filter_and_append)
    clean(log, NOW)
    assert appended == [300]
    assert read_all(log)[-1] == (300, b"during", b"during")
    # A fetch that got its file region before the swap still reads the old bytes.
    assert os.pread(region.fileno(), region.size, region.position) == before
    log.maintenance(NOW + 60_001)  # file.delete.delay.ms later the old files go
    assert not [n for n in os.listdir(log.directory) if n.endswith(".deleted")]
    log.close()


def test_cleaning_thread_alongside_appends_and_reads(tmp_path: Path) -> None:
    """Real threads: passes run in a worker while this thread appends, rolls and reads."""
    log = open_log(tmp_path)
    write_updates(log, 200)
    stop = threading.Event()
    passes: list[int] = []
    errors: list[BaseException] = []

    def cleaning() -> None:
        clock = NOW
        while not stop.is_set():
            try:
                stats = clean(log, clock)
                if stats is not None:
                    passes.append(stats.clean_offset)
            except CleanAborted:
                pass
            except BaseException as exc:  # reported below
                errors.append(exc)
                return

    worker = threading.Thread(target=cleaning)
    worker.start()
    try:
        for round_ in range(12):
            write_updates(log, 50, seed=100 + round_, start=200 + 50 * round_)
            entries = read_all(log)
            offsets = [o for o, _k, _v in entries]
            assert offsets == sorted(set(offsets))
            assert offsets[-1] == log.log_end_offset - 1
    finally:
        stop.set()
        worker.join(timeout=60)
    assert not errors, errors
    assert passes, "the worker must have completed passes meanwhile"
    clean(log, NOW)
    reference = open_log(tmp_path / "reference")
    write_updates(reference, 200)
    for round_ in range(12):
        write_updates(reference, 50, seed=100 + round_, start=200 + 50 * round_)
    assert_compacted(log, latest(read_all(reference)))
    assert_batches_valid(log)
    reference.close()
    log.close()


def test_log_changed_under_the_pass_aborts_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(tmp_path)
    write_updates(log, 300)
    before = read_all(log)
    original = cleaner_module._filter_batch

    def filter_and_truncate(*args: Any, **kwargs: Any) -> Any:
        if log.log_end_offset == 300:
            log.truncate_to(100)  # a follower truncating meanwhile
        return original(*args, **kwargs)

    monkeypatch.setattr(cleaner_module, "_filter_batch", filter_and_truncate)
    with pytest.raises(CleanAborted):
        clean(log, NOW)
    assert read_all(log) == [e for e in before if e[0] < log.log_end_offset]
    assert cleaned_files(log) == []
    abort = threading.Event()
    abort.set()
    with pytest.raises(CleanAborted):
        clean(log, NOW, abort=abort)
    log.close()


# --------------------------------------------------------------------------- crash safety


class Crash(BaseException):
    """Stands for the process dying: nothing after it runs, no cleanup."""


def abandon(log: Log) -> None:
    for segment in log.segments:
        segment.offset_index.close_file()
        segment.time_index.close_file()
        segment.file.close()


def test_leftover_cleaned_files_are_removed_at_open(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    write_updates(log, 200)
    before = read_all(log)
    abandon(log)
    for suffix in (".log.cleaned", ".index.cleaned", ".timeindex.cleaned"):
        (log.directory / f"{0:020d}{suffix}").write_bytes(b"partial")
    (log.directory / f"{40:020d}.index.swap").write_bytes(b"uncommitted")
    log = open_log(tmp_path)
    assert cleaned_files(log) == []
    assert read_all(log) == before
    log.close()


def test_crash_at_every_step_of_the_swap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kill the swap after each of its file operations: reopening gives either the log as it
    was before the pass or the cleaned log, never a mix, a loss or a duplicate."""
    reference = open_log(tmp_path / "reference")
    write_updates(reference, 300, codec=Compression.ZSTD)
    original = read_all(reference)
    reference.config = dataclasses.replace(reference.config, segment_bytes=1 << 20)  # one group
    clean(reference, NOW)
    cleaned = read_all(reference)
    reference.close()
    assert cleaned != original

    monkeypatch.setattr(cleaner_module._GroupWriter, "discard", lambda self: None)  # a crash cleans nothing
    real_replace = os.replace
    outcomes = []
    step = 0
    while True:
        directory = tmp_path / f"crash-{step}"
        log = open_log(directory)
        write_updates(log, 300, codec=Compression.ZSTD)
        log.config = dataclasses.replace(log.config, segment_bytes=1 << 20)
        calls = [0]

        def crashing_replace(src: Any, dst: Any, *, _limit: int = step, _calls: list[int] = calls) -> None:
            if _calls[0] == _limit:
                raise Crash()
            _calls[0] += 1
            real_replace(src, dst)

        monkeypatch.setattr(os, "replace", crashing_replace)
        try:
            clean(log, NOW)
            finished = True
        except Crash:
            finished = False
        monkeypatch.setattr(os, "replace", real_replace)
        abandon(log)
        log = open_log(directory)
        got = read_all(log)
        assert got in (original, cleaned), f"crash after {step} renames"
        assert cleaned_files(log) == []
        assert_batches_valid(log)
        assert log.log_end_offset == 300
        outcomes.append(got == cleaned)
        log.close()
        if finished:
            break
        step += 1
    # Crashes before the commit leave the old log, after it the cleaned one.
    assert outcomes[0] is False and outcomes[-1] is True
    assert outcomes == sorted(outcomes)
    assert step > 6


# --------------------------------------------------------------------------- the scheduler


@dataclasses.dataclass
class _Partition:
    log: Log


@dataclasses.dataclass
class _Replicas:
    partitions: dict[tuple[str, int], _Partition]


def test_scheduler_cleans_the_dirtiest_log_in_its_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dirty = open_log(tmp_path / "dirty", delete_retention_ms=1234)
    write_updates(dirty, 300)
    cleaned_once = open_log(tmp_path / "cleaned")
    write_updates(cleaned_once, 300)
    clean(cleaned_once, NOW)
    plain = open_log(tmp_path / "plain", cleanup_policy="delete")
    plain.append_as_leader(build_batch([NewRecord(b"v", None, (), NOW)]), leader_epoch=0, now_ms=NOW)
    replicas = _Replicas({("t", 0): _Partition(dirty), ("t", 1): _Partition(cleaned_once),
                          ("u", 0): _Partition(plain)})
    config = BrokerConfig({"log.cleaner.backoff.ms": "50"})
    cleaner = LogCleaner(config, replicas, clock=lambda: NOW)  # type: ignore[arg-type]

    candidates = cleaner.candidates()
    assert [c.name for c in candidates] == ["t-0", "t-1"]
    # Settings come from each log's own config (kept in step with its topic's configs).
    assert candidates[0].settings.min_cleanable_dirty_ratio == dirty.config.min_cleanable_dirty_ratio

    async def run() -> None:
        cleaner.start()
        for _ in range(200):
            if checkpoint.read_cleaner_state(dirty.directory) is not None:
                break
            await asyncio.sleep(0.02)
        await cleaner.stop()

    thread_names: list[str] = []
    original = cleaner_module._plan

    def recording_plan(*args: Any, **kwargs: Any) -> Any:
        thread_names.append(threading.current_thread().name)
        return original(*args, **kwargs)

    monkeypatch.setattr(cleaner_module, "_plan", recording_plan)
    asyncio.run(run())
    assert thread_names and all(n.startswith("log-cleaner") for n in thread_names)
    assert_compacted(dirty, latest(read_all(cleaned_once)))
    saved = checkpoint.read_cleaner_state(dirty.directory)
    assert saved is not None and saved.delete_horizon == NOW + 1234
    assert cleaner.passes.labels(result="done")._value.get() == 1
    assert cleaner.cleaned_bytes._value.get() > 0
    assert not cleaner.clean_filthiest(cleaner.candidates())  # nothing left above the ratio
    for log in (dirty, cleaned_once, plain):
        log.close()


def test_segment_paths_with_suffix(tmp_path: Path) -> None:
    segment = LogSegment.create(tmp_path, 5, now_ms=NOW, suffix=".cleaned")
    assert segment.log_path.name == f"{5:020d}.log.cleaned"
    assert segment.offset_index.path.name == f"{5:020d}.index.cleaned"
    assert segment.time_index.path.name == f"{5:020d}.timeindex.cleaned"
    segment.delete_files()
    assert os.listdir(tmp_path) == []
