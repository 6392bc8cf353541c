"""``riverlog mirror`` (issue #19): the MirrorMaker 2 configs it writes, what it reads back from a
running mirror, MM2's checkpoint records, the status and verify tables, and its one-line errors
when Connect or a cluster cannot be reached (real closed ports, nothing faked)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from riverlog.cli.mirror_cmd import render_status, status_summary
from riverlog.cli.mirror_plan import (
    BYTE_ARRAY_CONVERTER,
    IDENTITY_POLICY,
    Checkpoint,
    GroupStatus,
    MirrorOptions,
    PartitionStatus,
    RunningMirror,
    compare,
    compile_filter,
    connector_configs,
    decode_checkpoint,
    encode_checkpoint,
    mirrored_positions,
)
from support.brokers import riverlog_env

pytestmark = pytest.mark.unit

OPTIONS = MirrorOptions(source_bootstrap="kafka:9092", target_bootstrap="riverlog:9092", topics="orders,pay.*",
                        groups="billing")


def test_three_connectors_with_byte_converters_and_group_offset_sync() -> None:
    configs = connector_configs("mirror", OPTIONS)
    assert sorted(configs) == ["mirror-checkpoint", "mirror-heartbeat", "mirror-source"]
    for name, config in configs.items():
        assert config["name"] == name
        assert config["connector.class"].startswith("org.apache.kafka.connect.mirror.Mirror")
        assert {config[k] for k in ("key.converter", "value.converter", "header.converter")} == {BYTE_ARRAY_CONVERTER}
        assert config["source.cluster.alias"] == "kafka" and config["target.cluster.alias"] == "riverlog"
        assert all(isinstance(v, str) for v in config.values())  # Connect's REST API takes strings
    checkpoint = configs["mirror-checkpoint"]
    assert checkpoint["sync.group.offsets.enabled"] == "true"
    assert checkpoint["groups"] == "billing"
    assert checkpoint["emit.checkpoints.interval.seconds"] == checkpoint["sync.group.offsets.interval.seconds"] == "60"
    source = configs["mirror-source"]
    assert source["topics"] == "orders,pay.*" and source["offset.lag.max"] == "100"
    assert source["replication.factor"] == "-1"
    assert "exactly.once.support" not in source


def test_exactly_once_identity_names_and_extra_config() -> None:
    options = MirrorOptions(**{**OPTIONS.__dict__, "exactly_once": True, "identity": True,
                               "extra": {"source.cluster.security.protocol": "SASL_SSL"}})
    configs = connector_configs("m2", options)
    source = configs["m2-source"]
    assert source["exactly.once.support"] == "required"
    assert source["source.consumer.isolation.level"] == "read_committed"
    assert all(c["replication.policy.class"] == IDENTITY_POLICY for c in configs.values())
    assert all(c["source.cluster.security.protocol"] == "SASL_SSL" for c in configs.values())


def test_filters_match_whole_names_like_mirror_maker() -> None:
    keep = compile_filter("orders, pay.*", r"mm2.*\.internal, __.*")
    assert keep("orders") and keep("payments")
    assert not keep("orders-eu")  # a whole-name match, not a search
    assert not keep("__consumer_offsets") and not keep("mm2-offset-syncs.riverlog.internal")
    assert not compile_filter("", "")("orders")


def test_running_mirror_read_back_from_its_configs() -> None:
    configs = connector_configs("mirror", OPTIONS)
    view = RunningMirror.from_configs(configs["mirror-source"], configs["mirror-checkpoint"])
    assert view.target_topic("orders") == "kafka.orders"
    assert view.checkpoints_topic == "kafka.checkpoints.internal"
    assert view.mirrored_topics(["orders", "payments", "audit", "__consumer_offsets"]) == ["orders", "payments"]
    assert view.mirrored_groups(["billing", "connect-mirror", "other"]) == ["billing"]
    identity = RunningMirror.from_configs({**configs["mirror-source"], "replication.policy.class": IDENTITY_POLICY},
                                          None)
    assert identity.target_topic("orders") == "orders"


def test_checkpoint_records_round_trip_in_kafkas_layout() -> None:
    cp = Checkpoint("billing", "kafka.orders", 2, upstream=1960, downstream=1807, metadata="")
    key, value = encode_checkpoint(cp)
    # Kafka's layout: INT16-length strings, INT32 partition; value version 0, two INT64s, a string.
    assert key == b"\x00\x07billing\x00\x0ckafka.orders\x00\x00\x00\x02"
    assert value[:2] == b"\x00\x00" and len(value) == 2 + 8 + 8 + 2
    assert decode_checkpoint(key, value) == cp
    with pytest.raises(ValueError, match="checkpoint"):
        decode_checkpoint(b"\x00", b"")
    with pytest.raises(ValueError, match="version 1"):
        decode_checkpoint(key, b"\x00\x01" + value[2:])


def test_mirrored_positions_from_the_connect_offsets_api() -> None:
    offsets = [
        {"partition": {"cluster": "kafka", "topic": "orders", "partition": 0}, "offset": {"offset": 99}},
        {"partition": {"cluster": "other", "topic": "orders", "partition": 1}, "offset": {"offset": 5}},
        {"partition": {"cluster": "kafka", "topic": "orders", "partition": 2}, "offset": None},
    ]
    assert mirrored_positions(offsets, "kafka") == {("orders", 0): 100}


def test_lag_and_group_states() -> None:
    assert PartitionStatus("orders", 0, 0, 100, None, "kafka.orders", None).lag == 100
    assert PartitionStatus("orders", 0, 40, 100, None, "kafka.orders", 60).lag == 60  # retention moved the start
    assert PartitionStatus("orders", 0, 0, 100, 100, "kafka.orders", 100).lag == 0
    cp = Checkpoint("billing", "kafka.orders", 0, 90, 85, "")
    assert GroupStatus("billing", "orders", 0, 90, cp, 85).state == "translated"
    assert GroupStatus("billing", "orders", 0, 90, cp, 120).state == "translated"  # consumed on since
    # A newer commit that MM2 translates to the same offset gets no new checkpoint: settling,
    # then translated once it stayed so long enough (the status command decides when).
    assert GroupStatus("billing", "orders", 0, 95, cp, 85).state == "settling"
    assert GroupStatus("billing", "orders", 0, 95, cp, 85, settled=True).state == "translated"
    assert GroupStatus("billing", "orders", 0, 80, cp, 85).state == "pending"  # checkpoint of a later commit
    assert GroupStatus("billing", "orders", 0, 90, cp, None).state == "pending"  # not synced yet
    assert GroupStatus("billing", "orders", 0, 90, None, None).state == "pending"


def test_status_tables_and_summary() -> None:
    statuses = [{"name": "mirror-source", "connector": {"state": "RUNNING", "worker_id": "w:8083"},
                 "tasks": [{"id": 0, "state": "RUNNING"}]},
                {"name": "mirror-checkpoint", "connector": {"state": "RUNNING", "worker_id": "w:8083"}, "tasks": []}]
    partitions = [PartitionStatus("orders", 0, 0, 100, 98, "kafka.orders", 98)]
    groups = [GroupStatus("billing", "orders", 0, 90, Checkpoint("billing", "kafka.orders", 0, 90, 85, ""), 85)]
    text = render_status(statuses, partitions, groups)
    assert text.splitlines()[0].split() == ["CONNECTOR", "STATE", "TASKS", "WORKER"]
    assert "mirror-source      RUNNING  1/1 running  w:8083" in text
    assert "orders          0         100           98    2  kafka.orders          98" in text
    assert text.rstrip().endswith("translated")
    caught_up, translated, line = status_summary(statuses, partitions, groups, max_lag=0)
    assert (caught_up, translated) == (False, True)
    assert "2 record(s) not copied yet" in line
    assert status_summary(statuses, partitions, groups, max_lag=2)[0]
    failed = [{**statuses[0], "tasks": [{"id": 0, "state": "FAILED"}]}]
    assert not status_summary(failed, partitions, groups, max_lag=2)[0]
    assert "(no source topic" in render_status(statuses, [], [])


def test_compare_allows_resends_and_target_only_records_but_not_gaps() -> None:
    source = [b"a", b"b", b"c", b"d"]
    # A worker restart re-sends b, c; a moved producer writes x in between the last copies.
    ok = compare(source, [b"a", b"b", b"c", b"b", b"c", b"x", b"d", b"y"])
    assert ok.ok and (ok.in_order, ok.duplicates, ok.target_only, ok.absent) == (4, 2, 2, 0)
    gap = compare(source, [b"a", b"c", b"d"])
    assert not gap.ok and gap.first_missing == 1 and gap.absent == 1
    swapped = compare(source, [b"a", b"c", b"b", b"d"])
    assert not swapped.ok and swapped.absent == 0  # all there, out of order
    assert compare([], [b"x"]).ok


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _riverlog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "riverlog", *args], capture_output=True, text=True, timeout=60,
                          env=riverlog_env())


def test_unreachable_connect_and_cluster_are_one_line_with_the_fix() -> None:
    port = _closed_port()
    result = _riverlog("mirror", "status", "--connect-url", f"http://127.0.0.1:{port}")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"riverlog: error: cannot reach Kafka Connect at http://127.0.0.1:{port}")
    assert "riverlog-connect worker.properties" in result.stderr
    result = _riverlog("mirror", "start", "--connect-url", f"http://127.0.0.1:{port}", "--source-bootstrap",
                       f"127.0.0.1:{port}", "--target-bootstrap", f"127.0.0.1:{port}", "--topics", "orders")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "check --source-bootstrap and --target-bootstrap" in result.stderr
    result = _riverlog("mirror", "start", "--source-bootstrap", "a:1", "--target-bootstrap", "b:1", "--topics", "x",
                       "--sync-interval-seconds", "0")
    assert result.returncode == 2 and "--sync-interval-seconds must be at least 1" in result.stderr
