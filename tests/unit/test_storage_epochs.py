"""Leader epoch cache: OffsetsForLeaderEpoch answers, truncation, Kafka's checkpoint format."""

from __future__ import annotations

from pathlib import Path

import pytest
from riverlog.protocol.record_batch import NewRecord, build_batch
from riverlog.storage.config import LogConfig
from riverlog.storage.epoch_cache import LeaderEpochCache
from riverlog.storage.log import Log

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000


def cache_with(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path)
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


def test_end_offset_for_epoch(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0), (3, 10), (4, 25))
    leo = 40
    assert cache.end_offset_for_epoch(4, leo) == (4, 40)  # latest: the log end
    assert cache.end_offset_for_epoch(3, leo) == (3, 25)
    assert cache.end_offset_for_epoch(2, leo) == (1, 10)  # unknown epoch: largest below it
    assert cache.end_offset_for_epoch(1, leo) == (1, 10)
    assert cache.end_offset_for_epoch(0, leo) == (0, 0)  # below every epoch: the first start
    assert cache.end_offset_for_epoch(5, leo) == (-1, -1)  # above every epoch
    assert cache.end_offset_for_epoch(-1, leo) == (-1, -1)
    assert LeaderEpochCache(tmp_path).end_offset_for_epoch(0, leo) == (-1, -1)


def test_assign_keeps_the_first_start_and_drops_conflicts(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0), (1, 5), (2, 10))
    assert cache.entries == [(1, 0), (2, 10)]
    assert not cache.assign(2, 12)
    cache.assign(3, 8)  # a start offset below epoch 2's: epoch 2's entry was a replaced tail
    assert cache.entries == [(1, 0), (3, 8)]
    cache.assign(2, 20)  # an older epoch after newer ones: newer ones go
    assert cache.entries == [(1, 0), (2, 20)]
    assert cache.epoch_for_offset(19) == 1 and cache.epoch_for_offset(20) == 2


def test_truncation(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0), (3, 10), (4, 25))
    cache.truncate_from_end(25)
    assert cache.entries == [(1, 0), (3, 10)]
    cache.truncate_from_start(12)
    assert cache.entries == [(3, 12)]
    cache.truncate_from_start(5)
    assert cache.entries == [(3, 12)]


def test_checkpoint_file_uses_kafkas_format(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (2, 150))
    cache.write(sync=True)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n2 150\n"
    again = LeaderEpochCache(tmp_path)
    assert again.load() and again.entries == [(0, 0), (2, 150)]
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n3\n0 0\n")
    assert not LeaderEpochCache(tmp_path).load()


def test_log_tracks_epochs_through_appends_reopen_and_truncation(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300)
    log = Log.open(tmp_path / "t-0", config, now_ms=NOW)
    assert log.latest_epoch() == -1
    for epoch in (0, 0, 2, 2, 5):
        log.append_as_leader(build_batch([NewRecord(b"v")] * 3), leader_epoch=epoch, now_ms=NOW)
    assert log.latest_epoch() == 5
    assert log.end_offset_for_epoch(0) == (0, 6)
    assert log.end_offset_for_epoch(1) == (0, 6)
    assert log.end_offset_for_epoch(2) == (2, 12)
    assert log.end_offset_for_epoch(5) == (5, 15)
    log.assign_epoch(6, 15)  # the broker becoming leader before any append
    assert log.end_offset_for_epoch(5) == (5, 15) and log.end_offset_for_epoch(6) == (6, 15)
    log.close()
    log = Log.open(tmp_path / "t-0", config, now_ms=NOW)
    assert log.epochs.entries == [(0, 0), (2, 6), (5, 12), (6, 15)]
    log.truncate_to(9)
    assert log.epochs.entries == [(0, 0), (2, 6)]
    assert log.end_offset_for_epoch(2) == (2, 9)
    log.close()
