"""QuorumStorage: the quorum-state file, the framed entry log and checkpoint files on real disk."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from riverlog.controller.quorum.storage import (
    LOG_NAME,
    QUORUM_STATE_NAME,
    QuorumStorage,
    StorageError,
    checkpoint_name,
)
from riverlog.controller.raft import Entry, HardState, RaftConfig, RaftNode, Ready, Snapshot, Storage

pytestmark = pytest.mark.unit


def entries(*epochs: int, start: int = 0) -> list[Entry]:
    return [Entry(start + i, e, f"d{start + i}".encode(), control=(i == 0)) for i, e in enumerate(epochs)]


def reopen(directory: Path) -> Storage:
    storage = QuorumStorage(directory)
    try:
        return storage.load()
    finally:
        storage.close()


def test_empty_directory_loads_as_empty_storage(tmp_path: Path) -> None:
    st = QuorumStorage.in_log_dir(tmp_path)
    assert st.load() == Storage()
    st.close()
    assert (tmp_path / "__cluster_metadata-0" / LOG_NAME).exists()


def test_persist_and_load_round_trip(tmp_path: Path) -> None:
    st = QuorumStorage(tmp_path)
    st.load()
    st.persist(Ready(hard_state=HardState(3, 2, 2), entries=entries(1, 1, 3)))
    st.persist(Ready(entries=entries(3, 3, start=3)))
    st.close()
    loaded = reopen(tmp_path)
    assert loaded.hard_state == HardState(3, 2, 2)
    assert loaded.snapshot is None
    assert loaded.entries == entries(1, 1, 3) + entries(3, 3, start=3)
    assert json.loads((tmp_path / QUORUM_STATE_NAME).read_text()) == {"epoch": 3, "voted_for": 2, "leader_id": 2}
    # A vote without a leader, then an epoch without either: None survives the round trip.
    st = QuorumStorage(tmp_path)
    st.load()
    st.persist(Ready(hard_state=HardState(4, None, None)))
    st.close()
    assert reopen(tmp_path).hard_state == HardState(4, None, None)


def test_truncate_then_append_in_one_ready(tmp_path: Path) -> None:
    st = QuorumStorage(tmp_path)
    st.load()
    st.persist(Ready(entries=entries(1, 1, 1, 1, 1)))
    st.persist(Ready(hard_state=HardState(2, None, 7), truncate_to=2, entries=entries(2, 2, start=2)))
    assert st.stored_end == 4
    st.persist(Ready(truncate_to=0))  # everything goes
    assert st.stored_end is None
    st.persist(Ready(entries=entries(5, start=0)))
    st.close()
    assert reopen(tmp_path).entries == entries(5, start=0)


@pytest.mark.parametrize("cut", [1, 5, 12])
def test_torn_tail_is_dropped_and_the_file_cut(tmp_path: Path, cut: int) -> None:
    st = QuorumStorage(tmp_path)
    st.load()
    st.persist(Ready(entries=entries(1, 1, 1)))
    st.close()
    path = tmp_path / LOG_NAME
    size = path.stat().st_size
    os.truncate(path, size - cut)  # the last record is partial (header or payload)
    st = QuorumStorage(tmp_path)
    assert st.load().entries == entries(1, 1)
    # New records go right after the last good one, so the next life reads all of them.
    st.persist(Ready(entries=[Entry(2, 2, b"new")]))
    st.close()
    assert reopen(tmp_path).entries == [*entries(1, 1), Entry(2, 2, b"new")]


def test_crc_damage_drops_the_damaged_record_and_what_follows(tmp_path: Path) -> None:
    st = QuorumStorage(tmp_path)
    st.load()
    st.persist(Ready(entries=entries(1, 1, 1, 1)))
    st.close()
    path = tmp_path / LOG_NAME
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF  # a byte of the last record's data
    path.write_bytes(bytes(raw))
    assert reopen(tmp_path).entries == entries(1, 1, 1)
    # Garbage (an absurd length) after good records: dropped too.
    with path.open("ab") as f:
        f.write(b"\xff" * 20)
    assert reopen(tmp_path).entries == entries(1, 1, 1)


def test_stale_records_after_an_unsynced_cut_are_dropped(tmp_path: Path) -> None:
    # Simulates a cut that never reached the disk: a record of an older epoch after a newer one.
    st = QuorumStorage(tmp_path)
    st.load()
    st.persist(Ready(entries=entries(1, 2)))
    st.close()
    path = tmp_path / LOG_NAME
    from riverlog.controller.quorum.storage import encode_entry

    with path.open("ab") as f:
        f.write(encode_entry(Entry(2, 1, b"stale")))  # epoch goes backwards
        f.write(encode_entry(Entry(7, 2, b"gap")))
    assert reopen(tmp_path).entries == entries(1, 2)


def test_snapshot_and_log_start(tmp_path: Path) -> None:
    st = QuorumStorage(tmp_path)
    st.load()
    st.persist(Ready(entries=entries(1, 1, 2, 2, 2, 3)))
    st.persist(Ready(snapshot=Snapshot(2, 1, b"s2"), log_start=2))
    st.persist(Ready(snapshot=Snapshot(4, 2, b"s4"), log_start=3))  # trailing entries kept below
    st.persist(Ready(entries=[Entry(6, 3, b"x")]))
    st.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [checkpoint_name(4, 2), LOG_NAME]
    assert checkpoint_name(4, 2) == "00000000000000000004-2.checkpoint"
    loaded = reopen(tmp_path)
    assert loaded.snapshot == Snapshot(4, 2, b"s4")
    assert loaded.entries == entries(1, 1, 2, 2, 2, 3)[3:] + [Entry(6, 3, b"x")]


def test_log_start_past_the_end_empties_the_log_and_appends_resume_there(tmp_path: Path) -> None:
    # What installing a leader's snapshot looks like: drop everything, continue after it.
    st = QuorumStorage(tmp_path)
    st.load()
    st.persist(Ready(entries=entries(1, 1)))
    st.persist(Ready(snapshot=Snapshot(10, 4, b"s10"), truncate_to=0, log_start=10))
    assert st.stored_end is None
    st.persist(Ready(entries=[Entry(10, 4, b"a"), Entry(11, 4, b"b")]))
    st.close()
    loaded = reopen(tmp_path)
    assert loaded.snapshot == Snapshot(10, 4, b"s10")
    assert loaded.entries == [Entry(10, 4, b"a"), Entry(11, 4, b"b")]


def test_leftover_tmp_files_and_older_checkpoints_are_cleaned(tmp_path: Path) -> None:
    st = QuorumStorage(tmp_path)
    st.load()
    st.persist(Ready(hard_state=HardState(1, 1, 1), snapshot=Snapshot(3, 1, b"s3")))
    st.close()
    # A crash mid atomic-write, and a crash between a new checkpoint and deleting the old one.
    (tmp_path / (QUORUM_STATE_NAME + ".abc.tmp")).write_bytes(b"{half")
    (tmp_path / (checkpoint_name(9, 1) + ".x.tmp")).write_bytes(b"partial")
    (tmp_path / checkpoint_name(1, 1)).write_bytes(b"old")
    loaded = reopen(tmp_path)
    assert loaded.hard_state == HardState(1, 1, 1)
    assert loaded.snapshot == Snapshot(3, 1, b"s3")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([checkpoint_name(3, 1), LOG_NAME, QUORUM_STATE_NAME])


def test_damaged_checkpoint_or_quorum_state_is_an_error(tmp_path: Path) -> None:
    st = QuorumStorage(tmp_path)
    st.load()
    st.persist(Ready(snapshot=Snapshot(3, 1, b"s3")))
    st.close()
    path = tmp_path / checkpoint_name(3, 1)
    path.write_bytes(path.read_bytes()[:-1] + b"?")
    with pytest.raises(StorageError):
        reopen(tmp_path)
    path.unlink()
    (tmp_path / QUORUM_STATE_NAME).write_text('{"epoch": "x"}')
    with pytest.raises(StorageError):
        reopen(tmp_path)


def test_persist_rejects_a_gap(tmp_path: Path) -> None:
    st = QuorumStorage(tmp_path)
    st.load()
    st.persist(Ready(entries=entries(1, 1)))
    with pytest.raises(StorageError):
        st.persist(Ready(entries=[Entry(5, 1, b"gap")]))
    st.close()


def test_restart_reproduces_the_core_log(tmp_path: Path) -> None:
    """Drive a real single-voter node through proposals, a snapshot with trailing entries and a
    second snapshot; after every Ready the disk read back must rebuild the same log."""
    config = RaftConfig(snapshot_trailing_entries=2)
    st = QuorumStorage(tmp_path)
    node = RaftNode(1, [1], st.load(), config, now_ms=0)
    now = 0

    def drain() -> None:
        while node.has_ready():
            st.persist(node.ready())

    def check_restart() -> None:
        loaded = reopen(tmp_path)
        twin = RaftNode(1, [1], loaded, config, now_ms=now)
        assert twin.epoch == node.epoch and twin.leader_id == node.leader_id
        # The disk holds exactly the node's log, trailing entries below the snapshot included.
        assert loaded.entries == node.log.slice(node.log_start_offset, node.log_end_offset)
        assert loaded.snapshot == node.snapshot
        # A restarted core starts its log at the snapshot (it drops the trailing entries).
        assert twin.log_end_offset == node.log_end_offset
        assert twin.log.slice(twin.log_start_offset, twin.log_end_offset) == node.log.slice(
            twin.log_start_offset, node.log_end_offset
        )

    now += 10
    node.tick(now)
    drain()
    assert node.is_leader
    for i in range(6):
        node.propose([f"v{i}".encode()])
        drain()
        check_restart()
    node.take_snapshot(5, b"state@5")
    drain()
    check_restart()
    assert node.log_start_offset == 3
    for i in range(6, 9):
        node.propose([f"v{i}".encode()])
    drain()
    node.take_snapshot(node.applied_offset, b"state@end")
    drain()
    check_restart()
    st.close()
    # A restarted lone voter resigns its old epoch, re-elects itself and goes on from its disk.
    st = QuorumStorage(tmp_path)
    node = RaftNode(1, [1], st.load(), config, now_ms=now)
    end = node.log_end_offset
    now += 10_000
    node.tick(now)
    drain()
    now += 10_000
    node.tick(now)
    drain()
    assert node.is_leader
    node.propose([b"after"])
    drain()
    check_restart()
    assert node.log_end_offset > end
    st.close()
