"""Log directories (``cluster/log_dirs.py``) and the disk-error path of a log (issue #14).

The end-to-end behaviour (a full tmpfs, a broker carrying on, a restart recovering) is in
``tests/integration/test_log_dir_failure.py``; these are the rules underneath.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from riverlog.cluster.log_dirs import LogDir, LogDirs, prepare_dir
from riverlog.protocol.errors import ErrorCode, KafkaError
from riverlog.protocol.record_batch import NewRecord, build_batch
from riverlog.storage import Log, LogConfig

pytestmark = pytest.mark.unit


def test_meta_properties_name_cluster_node_and_a_lasting_directory_id(tmp_path: Path) -> None:
    first = prepare_dir(tmp_path / "d", "cluster-a", 3)
    props = (tmp_path / "d" / "meta.properties").read_text()
    assert "cluster.id=cluster-a" in props and "node.id=3" in props and f"directory.id={first}" in props
    assert prepare_dir(tmp_path / "d", "cluster-a", 3) == first


def test_a_directory_of_another_cluster_or_node_is_refused(tmp_path: Path) -> None:
    prepare_dir(tmp_path / "d", "cluster-a", 3)
    with pytest.raises(ValueError, match="cluster.id=cluster-a"):
        prepare_dir(tmp_path / "d", "cluster-b", 3)
    with pytest.raises(ValueError, match="node.id=3"):
        prepare_dir(tmp_path / "d", "cluster-a", 4)


def test_an_existing_meta_properties_gets_a_directory_id_and_keeps_the_rest(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "meta.properties").write_text("version=1\ncluster.id=c\nnode.id=1\n")
    dir_id = prepare_dir(d, "c", 1)
    assert (d / "meta.properties").read_text() == f"version=1\ncluster.id=c\nnode.id=1\ndirectory.id={dir_id}\n"


def test_new_partitions_go_to_the_online_directory_with_fewest_ties_to_the_first(tmp_path: Path) -> None:
    dirs = LogDirs([tmp_path / "a", tmp_path / "b", tmp_path / "c"], "c", 1)
    a, b, c = (d.path for d in dirs.dirs)
    assert dirs.choose({}).path == a  # type: ignore[union-attr]
    assert dirs.choose({a: 1}).path == b  # type: ignore[union-attr]
    assert dirs.choose({a: 1, b: 1}).path == c  # type: ignore[union-attr]
    assert dirs.choose({a: 2, b: 1, c: 1}).path == b  # type: ignore[union-attr]
    dirs.fail(dirs.dirs[1], "test")
    assert dirs.choose({a: 2, b: 0, c: 1}).path == c  # type: ignore[union-attr]
    dirs.fail(dirs.dirs[0], "test")
    dirs.fail(dirs.dirs[2], "test")
    assert dirs.choose({}) is None


def test_a_directory_fails_once_and_is_reported(tmp_path: Path) -> None:
    told: list[LogDir] = []
    dirs = LogDirs([tmp_path / "a", tmp_path / "b"], "c", 1, on_offline=told.append)
    assert dirs.fail(dirs.dirs[1], "No space left on device") is True
    assert dirs.fail(dirs.dirs[1], "again") is False
    assert told == [dirs.dirs[1]]
    assert dirs.offline_ids() == [dirs.dirs[1].dir_id]
    assert dirs.dirs[1].error == "No space left on device"
    assert dirs.containing(dirs.dirs[0].path / "t-0") is dirs.dirs[0]


def test_an_unusable_directory_starts_offline_and_none_usable_is_an_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    dirs = LogDirs([blocker / "sub", tmp_path / "ok"], "c", 1)
    assert [d.online for d in dirs.dirs] == [False, True]
    assert dirs.dirs[0].error
    with pytest.raises(OSError, match="no usable log directory"):
        LogDirs([blocker / "sub"], "c", 1)


def test_a_disk_error_while_appending_is_reported_and_answers_storage_error(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(), now_ms=0)
    reported: list[tuple[Log, OSError]] = []
    log.on_io_error = lambda failed, exc: reported.append((failed, exc))
    log.append_as_leader(build_batch([NewRecord(b"before", None, (), 0)]), leader_epoch=0, now_ms=0)
    # The next write fails as a dead disk would: the segment's descriptor now points at a file
    # open read-only (EBADF on write). Swapped in place, not closed, so the log still owns the
    # descriptor number and no other file (a client's socket, later) gets it closed under it.
    read_only = os.open(os.devnull, os.O_RDONLY)
    os.dup2(read_only, log.active_segment.fd)
    os.close(read_only)
    with pytest.raises(KafkaError) as failure:
        log.append_as_leader(build_batch([NewRecord(b"after", None, (), 0)]), leader_epoch=0, now_ms=0)
    assert failure.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert [failed for failed, _ in reported] == [log]
    assert log.log_end_offset == 1  # the failed append took no offset


def test_an_unavailable_log_answers_storage_error_without_touching_the_disk(tmp_path: Path) -> None:
    log = Log.unavailable(tmp_path / "missing" / "t-0", LogConfig())
    with pytest.raises(KafkaError) as failure:
        log.read(0, 100, max_offset=0)
    assert failure.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert log.size_bytes() == 0
    assert not (tmp_path / "missing").exists()
