"""The pure parts of the benchmark's MirrorMaker 2 workloads M1 and M1E (bench/harness/mirror.py,
issue #19 acceptance 5): the connector configs, when the copy counts as done, the rates, and the
reading of the Connect worker's offsets topic that decides it with exactly-once. The workloads
themselves run against real clusters in `bench/run.py --workloads M1,M1E`."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import pytest
from support.brokers import REPO_ROOT

if str(REPO_ROOT / "bench") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "bench"))

from harness import mirror  # noqa: E402  (bench/ is a folder of scripts, reached by path)
from harness.scale import SCALES  # noqa: E402
from harness.workloads import WORKLOADS  # noqa: E402

pytestmark = pytest.mark.unit

SOURCE, TARGET = "127.0.0.1:9092", "127.0.0.1:9093"
MM2 = "org.apache.kafka.connect.mirror"


def test_connectors_are_the_operators_three_copying_one_topic_between_the_two_clusters() -> None:
    configs = mirror.connector_configs(SOURCE, TARGET, "bench", tasks=8, exactly_once=False)
    assert set(configs) == {"mirror-source", "mirror-checkpoint", "mirror-heartbeat"}
    source = configs["mirror-source"]
    assert source["connector.class"] == f"{MM2}.MirrorSourceConnector"
    assert source["topics"] == "bench"
    assert source["tasks.max"] == "8"
    assert configs["mirror-heartbeat"]["tasks.max"] == "1"  # one heartbeat task whatever tasks.max says
    for config in configs.values():
        assert config["source.cluster.bootstrap.servers"] == SOURCE
        assert config["target.cluster.bootstrap.servers"] == TARGET
        assert config["source.cluster.alias"] == mirror.SOURCE_ALIAS
        assert config["value.converter"].endswith("ByteArrayConverter")  # records copied as bytes
        assert config["sync.topic.acls.enabled"] == "false"  # no authorizer on either broker
    # One broker per cluster: every topic MirrorMaker 2 creates has one replica.
    assert source["replication.factor"] == source["offset-syncs.topic.replication.factor"] == "1"
    assert "exactly.once.support" not in source
    assert mirror.remote_topic("bench") == "source.bench"
    assert mirror.worker_overrides(False) == {}


def test_exactly_once_is_required_of_the_connector_and_enabled_on_the_worker() -> None:
    source = mirror.connector_configs(SOURCE, TARGET, "bench", tasks=2, exactly_once=True)["mirror-source"]
    assert source["exactly.once.support"] == "required"
    assert source["source.consumer.isolation.level"] == "read_committed"
    assert mirror.worker_overrides(True) == {"exactly.once.source.support": "enabled"}


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def counts(*values: int) -> Iterator[int]:
    yield from values


def test_the_copy_is_timed_from_the_connectors_start_to_the_poll_that_finds_every_record() -> None:
    clock = FakeClock()
    seen = counts(0, 0, 0, 400, 900, 1000)
    progress = mirror.wait_for_copy(lambda: next(seen), 1000, start=clock.now, timeout=60,
                                    clock=clock, sleep=clock.sleep)
    step = mirror.POLL_S
    assert progress.empty_s == pytest.approx(2 * step)  # the last poll that found nothing
    assert progress.first_s == pytest.approx(3 * step)
    assert progress.done_s == pytest.approx(5 * step)
    values = mirror.rates(1000, 1024, progress)
    assert values["records_s"] == pytest.approx(1000 / (5 * step))
    assert values["mb_s"] == pytest.approx(1000 * 1024 / 1e6 / (5 * step))
    assert values["copy_records_s"] == pytest.approx(1000 / (3 * step))
    assert values["first_record_s"] == pytest.approx(3 * step)


def test_a_copy_that_one_poll_saw_begin_and_end_still_has_a_duration() -> None:
    clock = FakeClock()
    seen = counts(0, 0, 1000)
    progress = mirror.wait_for_copy(lambda: next(seen), 1000, start=clock.now, timeout=60,
                                    clock=clock, sleep=clock.sleep)
    assert progress.first_s == progress.done_s
    assert mirror.rates(1000, 1024, progress)["copy_records_s"] == pytest.approx(1000 / mirror.POLL_S)


def test_a_copy_that_stalls_fails_the_run_saying_how_far_it_got() -> None:
    clock = FakeClock()
    with pytest.raises(TimeoutError, match=r"(?s)500 of 1000 records.*worker log"):
        mirror.wait_for_copy(lambda: 500, 1000, start=clock.now, timeout=5, clock=clock, sleep=clock.sleep,
                             describe=lambda: "worker log")


def offset_record(connector: str, partition: object, offset: int) -> tuple[bytes, bytes]:
    return json.dumps([connector, partition]).encode(), json.dumps({"offset": offset}).encode()


def test_the_source_connectors_committed_offsets_count_the_records_made_visible() -> None:
    key, value = offset_record("mirror-source", {"cluster": "source", "partition": 3, "topic": "bench"}, 41)
    # MirrorMaker 2 stores the last copied record's offset: 42 records of partition 3 are there.
    assert mirror.source_offset_position(key, value, "mirror-source") == (3, 42)
    assert mirror.source_offset_position(key, value, "mirror-other") is None
    assert mirror.source_offset_position(key, None, "mirror-source") is None  # a tombstone
    odd_key, odd_value = offset_record("mirror-source", "not-a-partition-map", 1)
    assert mirror.source_offset_position(odd_key, odd_value, "mirror-source") is None


def test_m1_and_m1e_are_workloads_with_sizes_in_both_scales() -> None:
    for key in ("M1", "M1E"):
        metrics = {m.key for m in WORKLOADS[key].metrics}
        assert {"records_s", "copy_records_s", "worker_start_s", "worker_cpu_s_per_gb",
                "cpu_s_per_gb", "rss_peak_mib"} <= metrics
    for scale in SCALES.values():
        assert scale.m1_records > 0 and 1 <= scale.m1_tasks <= scale.m1_partitions
    assert SCALES["full"].m1_records * SCALES["full"].record_bytes >= 10**9
