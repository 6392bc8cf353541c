"""Log compaction of transactional data (storage/cleaner.py), as Kafka's cleaner does it.

Logs are built with transactional batches, commits, aborts and open transactions, cleaned with an
injected clock, and read back batch by batch: what survives, what a read_committed consumer sees
(the aborted-transaction index applied as Kafka's consumer applies it), which markers stay, and
what the cleaned segments' ``.txnindex`` holds.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
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
    parse_txn_marker,
    read_header,
    validate_batch,
)
from riverlog.storage.cleaner import clean, cleanable_range
from riverlog.storage.config import LogConfig
from riverlog.storage.log import Log
from riverlog.storage.txn_index import AbortedTxn

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000
DELETE_RETENTION = 10 * 60 * 1000


def open_log(path: Path, **config: Any) -> Log:
    config.setdefault("segment_bytes", 1 << 20)
    config.setdefault("index_interval_bytes", 256)
    config.setdefault("cleanup_policy", "compact")
    config.setdefault("delete_retention_ms", DELETE_RETENTION)
    config.setdefault("file_delete_delay_ms", 0)
    return Log.open(path / "t-0", LogConfig(**config), now_ms=NOW)


class Writer:
    """Appends as a partition leader would: plain records, transactional batches per producer
    (with sequence numbers), and markers."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.seqs: dict[int, int] = {}

    def plain(self, *items: tuple[bytes, bytes | None]) -> int:
        batch = build_batch([NewRecord(v, k, (), NOW) for k, v in items])
        return self.log.append_as_leader(batch, leader_epoch=0, now_ms=NOW).last_offset

    def txn(self, pid: int, *items: tuple[bytes, bytes | None], epoch: int = 0, coordinator: bool = False,
            codec: int = Compression.NONE) -> int:
        """One transactional batch; ``coordinator``: written as the group coordinator writes a
        transactional offset commit (base sequence -1)."""
        seq = -1 if coordinator else self.seqs.get(pid, 0)
        batch = build_batch([NewRecord(v, k, (), NOW) for k, v in items], producer_id=pid, producer_epoch=epoch,
                            base_sequence=seq, transactional=True, compression=codec)
        info = self.log.append_as_leader(batch, leader_epoch=0, now_ms=NOW, from_coordinator=coordinator)
        if not coordinator:
            self.seqs[pid] = seq + len(items)
        return info.last_offset

    def end(self, pid: int, *, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> int:
        info = self.log.append_txn_marker(producer_id=pid, producer_epoch=epoch, coordinator_epoch=coordinator_epoch,
                                          committed=commit, leader_epoch=0, now_ms=NOW)
        return info.last_offset

    def roll(self) -> None:
        self.log.roll(NOW)
        self.log.update_high_watermark(self.log.log_end_offset)


@dataclass(frozen=True)
class Batch:
    base: int
    last: int
    pid: int
    epoch: int
    transactional: bool
    control: bool
    marker: str | None  # "commit" / "abort" for a marker batch
    horizon: int | None
    records: list[tuple[int, bytes | None, bytes | None]]


def batches(log: Log) -> list[Batch]:
    out = []
    for segment in log.segments:
        for header in segment.iter_headers(0):
            data = segment.read_bytes(header.position, header.size)
            h = read_header(data)
            validate_batch(data, h, compacted=True)
            marker = parse_txn_marker(data, h) if h.is_control else None
            out.append(Batch(
                h.base_offset, h.last_offset, h.producer_id, h.producer_epoch, h.is_transactional, h.is_control,
                None if marker is None else ("commit" if marker.committed else "abort"), h.delete_horizon_ms,
                [] if h.is_control else [(r.offset, r.key, r.value) for r in decode_records(data, h)],
            ))
    return out


def records(log: Log) -> dict[int, tuple[bytes | None, bytes | None]]:
    """Every data record stored, read_uncommitted: offset -> (key, value)."""
    return {o: (k, v) for b in batches(log) for o, k, v in b.records}


def read_committed(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """What a read_committed consumer reads from the start up to the LSO, dropping aborted
    transactions' batches with the index entries, as Kafka's consumer does."""
    lso = log.last_stable_offset()
    pending = sorted(log.aborted_transactions(log.log_start_offset, lso), key=lambda t: t.first_offset)
    aborted_pids: set[int] = set()
    out: list[tuple[int, bytes | None, bytes | None]] = []
    for b in batches(log):
        if b.base >= lso:
            break
        while pending and pending[0].first_offset <= b.last:
            aborted_pids.add(pending.pop(0).producer_id)
        if b.control:
            if b.marker == "abort":
                aborted_pids.discard(b.pid)
            continue
        if b.transactional and b.pid in aborted_pids:
            continue
        out.extend(r for r in b.records if r[0] < lso)
    return out


def latest(entries: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, tuple[int, bytes | None]]:
    out: dict[bytes | None, tuple[int, bytes | None]] = {}
    for offset, key, value in entries:
        out[key] = (offset, value)
    return out


def markers(log: Log) -> list[tuple[int, str | None, int | None]]:
    return [(b.base, b.marker, b.horizon) for b in batches(log) if b.control]


def txn_entries(log: Log) -> list[AbortedTxn]:
    return [e for s in log.segments for e in s.txn_index.entries]


# --------------------------------------------------------------------------- aborts and commits


def test_aborted_records_are_removed_and_never_supersede_committed_ones(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    w = Writer(log)
    w.plain((b"k1", b"c0"), (b"k2", b"c0"))  # 0-1
    assert w.txn(100, (b"k1", b"aborted"), (b"k2", b"aborted")) == 3  # 2-3
    assert w.txn(200, (b"k1", b"c1")) == 4
    assert w.end(100, commit=False) == 5
    assert w.end(200, commit=True) == 6
    w.roll()
    # Later transactions of both producers, so the batches above are not their last.
    assert w.txn(100, (b"k5", b"c2")) == 7
    assert w.txn(200, (b"k6", b"c2")) == 8
    w.end(100, commit=True)  # 9
    w.end(200, commit=True)  # 10
    w.roll()
    before = read_committed(log)
    entry = log.segments[0].txn_index.entries
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in entry] == [(100, 2, 5)]

    stats = clean(log, NOW)
    assert stats is not None and stats.aborted_batches_removed == 1 and stats.markers_removed == 0
    stored = records(log)
    assert not any(v == b"aborted" for _k, v in stored.values())
    # k1: the committed transactional write at 4 supersedes 0; k2 keeps its value at 1 (the
    # aborted write at 3 does not count).
    assert stored == {1: (b"k2", b"c0"), 4: (b"k1", b"c1"), 7: (b"k5", b"c2"), 8: (b"k6", b"c2")}
    assert latest(read_committed(log)) == latest(before)
    # The abort marker stays (its transaction's batch was there during this pass), with its entry.
    assert markers(log) == [(5, "abort", None), (6, "commit", None), (9, "commit", None), (10, "commit", None)]
    assert txn_entries(log) == entry

    # Second pass: nothing of transaction 100 is left, so its marker gets a delete horizon and its
    # index entry goes; the commit markers' transactions still have records.
    later = NOW + 1000
    stats = clean(log, later)
    assert stats is not None
    assert markers(log) == [(5, "abort", later + DELETE_RETENTION), (6, "commit", None), (9, "commit", None),
                            (10, "commit", None)]
    assert txn_entries(log) == []
    assert not any(n.endswith(".txnindex") for n in os.listdir(log.directory))
    # The horizon, like a tombstone's, makes the log due for cleaning when it passes.
    state = cleanable_range(log, later + DELETE_RETENTION)
    assert state is not None and state.delete_horizon_due
    state = cleanable_range(log, later + DELETE_RETENTION - 1)
    assert state is not None and not state.delete_horizon_due

    stats = clean(log, later + DELETE_RETENTION - 1)
    assert stats is not None and [m[0] for m in markers(log)] == [5, 6, 9, 10]
    stats = clean(log, later + DELETE_RETENTION)
    assert stats is not None and stats.markers_removed == 1
    assert markers(log) == [(6, "commit", None), (9, "commit", None), (10, "commit", None)]
    assert latest(read_committed(log)) == latest(before)

    # A commit marker goes the same way once its transaction's batches are gone: batch 4 is
    # dropped by the pass that supersedes its record, which still saw it, so the marker's horizon
    # starts with the pass after.
    w.plain((b"k1", b"c3"), (b"k5", b"c3"))  # 11-12: supersede the records at 4 and 7
    w.roll()
    t = later + 2 * DELETE_RETENTION
    clean(log, t)
    assert records(log) == {1: (b"k2", b"c0"), 8: (b"k6", b"c2"), 11: (b"k1", b"c3"), 12: (b"k5", b"c3")}
    # 7 is producer 100's last data batch: kept empty (and so its commit marker stays).
    assert [(b.base, len(b.records)) for b in batches(log) if b.pid == 100 and not b.control] == [(7, 0)]
    assert markers(log) == [(6, "commit", None), (9, "commit", None), (10, "commit", None)]
    clean(log, t + 1)
    assert markers(log) == [(6, "commit", t + 1 + DELETE_RETENTION), (9, "commit", None), (10, "commit", None)]
    clean(log, t + 1 + DELETE_RETENTION)
    assert markers(log) == [(9, "commit", None), (10, "commit", None)]
    assert latest(read_committed(log)) == latest(records_list(log))
    log.close()


def records_list(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(o, k, v) for o, (k, v) in sorted(records(log).items())]


def test_read_committed_view_is_preserved_with_random_transactions(tmp_path: Path) -> None:
    """Many producers, commits and aborts interleaved over many segments: after cleaning (several
    passes, time moving past delete.retention.ms), a read_committed consumer sees exactly the
    latest committed value of every key at its offset, and nothing of an aborted transaction is
    left in the log."""
    for seed in range(4):
        directory = tmp_path / f"seed-{seed}"
        log = open_log(directory, segment_bytes=4096)
        w = Writer(log)
        rng = random.Random(seed)
        keys = [b"key-%d" % i for i in range(12)]
        open_txns: dict[int, bool] = {}  # pid -> will commit
        for step in range(300):
            choice = rng.random()
            pid = rng.choice([1, 2, 3, 4])
            if choice < 0.25:
                w.plain((rng.choice(keys), b"plain-%d" % step))
            elif choice < 0.8:
                if pid not in open_txns:
                    open_txns[pid] = rng.random() < 0.6
                items = [(rng.choice(keys), b"txn-%d-%d-%d" % (pid, step, i)) for i in range(rng.randint(1, 3))]
                codec = rng.choice([Compression.NONE, Compression.GZIP])
                if pid == 4:  # a coordinator-style writer (transactional offset commits)
                    w.txn(pid, *items, coordinator=True, codec=codec)
                else:
                    w.txn(pid, *items, codec=codec)
            elif pid in open_txns:
                w.end(pid, commit=open_txns.pop(pid))
            if rng.random() < 0.05:
                log.roll(NOW)
        for pid, commit in sorted(open_txns.items()):
            w.end(pid, commit=commit)
        w.roll()
        expected = latest(read_committed(log))
        aborted_values = {v for o, (k, v) in records(log).items()} - {v for _o, v in expected.values()}
        t = NOW
        for _ in range(4):
            clean(log, t)
            t += DELETE_RETENTION + 1
            assert latest(read_committed(log)) == expected, seed
        view = read_committed(log)
        assert len(view) == len(expected) and latest(view) == expected, seed
        stored = records(log)
        assert {v for _k, v in stored.values()} == {v for _o, v in expected.values()}, seed
        assert not aborted_values & {v for _k, v in stored.values()}
        # No index entry is left whose marker went.
        kept_aborts = {(b.pid, b.base) for b in batches(log) if b.marker == "abort"}
        assert all((e.producer_id, e.last_offset) in kept_aborts for e in txn_entries(log)), seed
        log.close()


def test_aborted_transactional_offset_commit_keeps_the_committed_offset(tmp_path: Path) -> None:
    """``__consumer_offsets``: the group coordinator writes transactional offset commits (base
    sequence -1); an aborted one must not compact away the offset committed before it."""
    log = open_log(tmp_path)
    w = Writer(log)
    key = b"\x00\x01group|topic|0"
    w.plain((key, b"offset=10"))  # 0: a plain OffsetCommit
    w.roll()
    w.txn(700, (key, b"offset=20"), coordinator=True)  # 1
    w.end(700, commit=False)  # 2
    w.roll()
    clean(log, NOW)
    assert records(log) == {0: (key, b"offset=10")}
    # The producer has no data batch in its producer state (coordinator batches carry no
    # sequence), so Kafka's rule keeps its newest marker of its epoch: after the horizon it is
    # emptied, not removed.
    clean(log, NOW + 1)
    assert markers(log) == [(2, "abort", NOW + 1 + DELETE_RETENTION)]
    clean(log, NOW + 1 + DELETE_RETENTION)
    empty = [b for b in batches(log) if b.control]
    assert [(b.base, b.pid, b.marker, b.transactional) for b in empty] == [(2, 700, None, True)]
    assert records(log) == {0: (key, b"offset=10")}
    log.close()


def test_marker_of_a_bumped_epoch_survives_as_the_producers_last_entry(tmp_path: Path) -> None:
    """A transaction aborted by the coordinator with a bumped epoch (a timed-out producer fenced):
    the producer's data of the old epoch goes, the marker holding its new epoch stays (emptied
    after the horizon), and producer state rebuilt from the cleaned log alone still fences the
    old epoch."""
    log = open_log(tmp_path)
    w = Writer(log)
    w.txn(900, (b"a", b"zombie"), epoch=0)  # 0
    w.end(900, commit=False, epoch=1)  # 1
    w.plain((b"b", b"x"))  # 2
    w.roll()
    clean(log, NOW)
    clean(log, NOW + 1)
    assert markers(log) == [(1, "abort", NOW + 1 + DELETE_RETENTION)]
    clean(log, NOW + 1 + DELETE_RETENTION)
    control = [b for b in batches(log) if b.control]
    assert [(b.base, b.epoch, b.marker) for b in control] == [(1, 1, None)]  # empty: header only
    assert records(log) == {2: (b"b", b"x")}

    def check_fenced(log: Log) -> None:
        batch = build_batch([NewRecord(b"v", b"a", (), NOW)], producer_id=900, producer_epoch=0, base_sequence=1,
                            transactional=True)
        with pytest.raises(KafkaError) as err:
            log.append_as_leader(batch, leader_epoch=0, now_ms=NOW)
        assert err.value.code == ErrorCode.INVALID_PRODUCER_EPOCH

    check_fenced(log)
    log.close()
    for name in os.listdir(log.directory):
        if name.endswith(".producer-snapshot"):
            os.unlink(log.directory / name)
    log = open_log(tmp_path)
    assert log.producers.producers[900].epoch == 1
    check_fenced(log)
    log.close()


def test_aborted_batch_that_is_its_producers_last_is_kept_empty(tmp_path: Path) -> None:
    """Kafka's RETAIN_EMPTY: the producer's last data batch holds its last sequence, so even
    aborted it stays as a header; its marker and index entry stay with it."""
    log = open_log(tmp_path)
    w = Writer(log)
    w.txn(300, (b"a", b"v0"), (b"b", b"v0"))  # 0-1 (committed below)
    w.end(300, commit=True)  # 2
    w.txn(300, (b"a", b"aborted"))  # 3
    w.end(300, commit=False)  # 4
    w.roll()
    for t in (NOW, NOW + 1, NOW + 2 * DELETE_RETENTION):
        clean(log, t)
        data = [b for b in batches(log) if not b.control]
        assert [(b.base, b.last, len(b.records)) for b in data] == [(0, 1, 2), (3, 3, 0)]
        assert [m[:2] for m in markers(log)] == [(2, "commit"), (4, "abort")]
        assert [(e.producer_id, e.first_offset, e.last_offset) for e in txn_entries(log)] == [(300, 3, 4)]
    # The producer's next batch continues its sequence after a restart too.
    log.close()
    for name in os.listdir(log.directory):
        if name.endswith(".producer-snapshot"):
            os.unlink(log.directory / name)
    log = open_log(tmp_path)
    assert log.producers.producers[300].last_seq == 2
    log.close()


# --------------------------------------------------------------------------- the cleanable range


def test_open_transaction_bounds_the_cleanable_range(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    w = Writer(log)
    w.plain((b"k", b"v0"))  # 0
    w.roll()
    w.plain((b"k", b"v1"))  # 1
    w.txn(400, (b"k", b"pending"))  # 2: open transaction
    w.roll()
    w.plain((b"k", b"v3"), (b"j", b"v3"))  # 3-4
    w.roll()
    assert log.last_stable_offset() == 2
    state = cleanable_range(log, NOW)
    # Segments [0,1) only: the one holding the LSO is the first uncleanable.
    assert state is not None and state.first_uncleanable == 1
    stats = clean(log, NOW)
    assert stats is not None and stats.clean_offset == 1
    assert records(log) == {0: (b"k", b"v0"), 1: (b"k", b"v1"), 2: (b"k", b"pending"), 3: (b"k", b"v3"),
                            4: (b"j", b"v3")}

    # Aborted, but the marker not yet replicated: still unstable.
    w.end(400, commit=False)  # 5
    assert log.high_watermark == 5 and log.last_stable_offset() == 2
    state = cleanable_range(log, NOW)
    assert state is not None and state.first_uncleanable == 1
    w.roll()  # replicated now
    assert log.last_stable_offset() == log.log_end_offset
    clean(log, NOW)
    assert records(log) == {3: (b"k", b"v3"), 4: (b"j", b"v3")}
    log.close()


def test_aborted_data_whose_marker_is_in_the_active_segment(tmp_path: Path) -> None:
    """The abort marker need not be in the cleaned range: the entry in the active segment's index
    is enough to drop the transaction's batches, and it stays there."""
    log = open_log(tmp_path)
    w = Writer(log)
    w.plain((b"k", b"v0"))  # 0
    w.txn(500, (b"k", b"aborted"))  # 1
    w.roll()
    w.plain((b"z", b"z"))  # 2
    w.end(500, commit=False)  # 3, in the active segment
    log.update_high_watermark(log.log_end_offset)
    clean(log, NOW)
    assert records(log) == {0: (b"k", b"v0"), 2: (b"z", b"z")}
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in log.active_segment.txn_index.entries] == [
        (500, 1, 3)]
    assert latest(read_committed(log)) == {b"k": (0, b"v0"), b"z": (2, b"z")}
    log.close()


def test_cleaned_txnindex_survives_a_reopen(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    w = Writer(log)
    w.txn(600, (b"a", b"x"))  # 0
    w.end(600, commit=False)  # 1
    w.txn(601, (b"a", b"y"))  # 2
    w.end(601, commit=False)  # 3
    w.roll()
    w.txn(600, (b"b", b"z"))  # 4
    w.end(600, commit=True)  # 5
    w.txn(601, (b"b", b"w"))  # 6
    w.end(601, commit=True)  # 7
    w.roll()
    clean(log, NOW)
    kept = [(e.producer_id, e.first_offset, e.last_offset) for e in txn_entries(log)]
    assert kept == [(600, 0, 1), (601, 2, 3)]
    log.close()
    log = open_log(tmp_path)
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in txn_entries(log)] == kept
    clean(log, NOW + 1)
    assert txn_entries(log) == []
    log.close()
    log = open_log(tmp_path)
    assert txn_entries(log) == []
    log.close()


def test_follower_replicates_a_log_cleaned_of_transactions(tmp_path: Path) -> None:
    """What the cleaner leaves (markers with a delete horizon, emptied transactional and control
    batches) is accepted by a follower, whose producer state then matches the leader's; the
    follower rebuilds the aborted-transaction entries of the markers that stayed."""
    leader = open_log(tmp_path / "leader")
    w = Writer(leader)
    w.txn(10, (b"a", b"x"))  # 0
    w.end(10, commit=False, epoch=1)  # 1: epoch bumped, kept as the producer's last
    w.txn(11, (b"b", b"y"))  # 2
    w.end(11, commit=False)  # 3
    w.txn(11, (b"c", b"z"))  # 4
    w.end(11, commit=True)  # 5
    w.txn(12, (b"d", b"v"))  # 6: producer 12's last batch, aborted: kept empty
    w.end(12, commit=False)  # 7
    w.plain((b"b", b"p"))  # 8
    w.roll()
    clean(leader, NOW)
    clean(leader, NOW + 1)
    clean(leader, NOW + 1 + DELETE_RETENTION)
    kinds = [(b.base, b.control, b.marker, len(b.records)) for b in batches(leader)]
    assert kinds == [(1, True, None, 0), (4, False, None, 1), (5, True, "commit", 0), (6, False, None, 0),
                     (7, True, "abort", 0), (8, False, None, 1)]
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(leader.read_records_bytes(0, 1 << 30), now_ms=NOW)
    follower.update_high_watermark(follower.log_end_offset)
    assert batches(follower) == batches(leader)
    assert {pid: (e.epoch, e.last_seq) for pid, e in follower.producers.producers.items()} == {
        pid: (e.epoch, e.last_seq) for pid, e in leader.producers.producers.items()}
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in txn_entries(follower)] == [(12, 6, 7)]
    assert read_committed(follower) == read_committed(leader) == [(4, b"c", b"z"), (8, b"b", b"p")]
    leader.close()
    follower.close()


# --------------------------------------------------------------------------- the scheduler


@dataclass
class _Partition:
    log: Log


@dataclass
class _Replicas:
    partitions: dict[tuple[str, int], _Partition] = field(default_factory=dict)


def test_scheduler_waits_for_the_open_transaction_and_for_the_markers_horizon(tmp_path: Path) -> None:
    """The scheduler sees no cleanable bytes past an open transaction; once it ends the log is
    cleaned; a marker's delete horizon makes the log due by itself (no new dirty data needed)."""
    log = open_log(tmp_path, min_cleanable_dirty_ratio=0.01)
    w = Writer(log)
    w.plain((b"k", b"v0"))  # 0
    w.roll()
    w.txn(42, (b"k", b"aborted"))  # 1: open
    w.roll()
    w.plain((b"k", b"v2"))  # 2
    w.roll()
    now = [NOW]
    replicas: Any = _Replicas({("t", 0): _Partition(log)})  # the few members the scheduler uses
    cleaner = LogCleaner(BrokerConfig({}), replicas, clock=lambda: now[0])
    # Segment [0, 1) is cleanable, alone and dirty: one pass cleans it (nothing superseded yet).
    assert cleaner.clean_filthiest(cleaner.candidates())
    assert records(log) == {0: (b"k", b"v0"), 1: (b"k", b"aborted"), 2: (b"k", b"v2")}
    assert not cleaner.clean_filthiest(cleaner.candidates())  # the rest is past the LSO
    w.end(42, commit=False)  # 3
    w.txn(42, (b"j", b"x"))  # 4: the producer's last batch now (so 1 need not stay, even empty)
    w.end(42, commit=True)  # 5
    w.roll()
    assert cleaner.clean_filthiest(cleaner.candidates())
    assert records(log) == {2: (b"k", b"v2"), 4: (b"j", b"x")}
    # The aborted batch was seen by this pass: its marker stays.
    assert markers(log) == [(3, "abort", None), (5, "commit", None)]
    # The next pass (any: here a forced one) starts the marker's horizon ...
    clean(log, now[0])
    assert markers(log) == [(3, "abort", NOW + DELETE_RETENTION), (5, "commit", None)]
    assert not cleaner.clean_filthiest(cleaner.candidates())
    # ... and once it passes, the scheduler picks the log again without new data.
    now[0] = NOW + DELETE_RETENTION
    assert cleaner.clean_filthiest(cleaner.candidates())
    assert markers(log) == [(5, "commit", None)]
    assert not cleaner.clean_filthiest(cleaner.candidates())
    log.close()
