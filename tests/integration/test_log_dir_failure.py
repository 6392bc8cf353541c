"""A full disk takes one log directory offline, not the broker (issue #14, acceptance 4).

The broker gets two log directories: its usual data directory and a small tmpfs this test mounts
(root is needed for the mount; CI runs as root). A ballast file leaves the tmpfs a little room,
then a producer writes to the partition placed there until an append fails. Kafka's behaviour,
which the test encodes and checks on both targets:

- the failed append answers KAFKA_STORAGE_ERROR, and DescribeLogDirs reports the directory with
  KAFKA_STORAGE_ERROR while the other one is fine;
- the rest of the broker keeps working: producing to and consuming from a partition in the other
  directory, and a consumer group whose offsets partition lives there too;
- once space is freed and the broker restarts, every acknowledged record is there.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient
from support.brokers import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

TMPFS_BYTES = 16 << 20
ROOM_BYTES = 1536 << 10  # what the ballast leaves free: a few dozen records
RECORD_BYTES = 48 << 10
KAFKA_STORAGE_ERROR = 56


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs, unmounted when the test ends."""
    if os.geteuid() != 0:
        pytest.fail("this test mounts a tmpfs and must run as root (CI does); run it with sudo")
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs", str(mount_point)], check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill_to_leave(directory: Path, room: int) -> Path:
    """A ballast file that leaves ``room`` bytes free in ``directory``'s file system."""
    stats = os.statvfs(directory)
    free = stats.f_bavail * stats.f_frsize
    ballast = directory / "ballast"
    with ballast.open("wb") as out:
        remaining = max(0, free - room)
        chunk = b"\0" * (1 << 20)
        while remaining > 0:
            out.write(chunk[: min(len(chunk), remaining)])
            remaining -= min(len(chunk), remaining)
    return ballast


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)


def log_dir_layout(bootstrap: str) -> dict[str, tuple[int, set[str]]]:
    """DescribeLogDirs: log dir -> (error code, topics with a partition in it)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        answers = admin.describe_log_dirs()
    finally:
        admin.close()
    layout: dict[str, tuple[int, set[str]]] = {}
    for answer in answers:
        for result in _field(answer, "results", "log_dirs"):
            topics = {_field(t, "name", "topic") for t in _field(result, "topics")}
            layout[str(Path(_field(result, "log_dir")).resolve())] = (_field(result, "error_code"), topics)
    return layout


def _field(item: object, *names: str) -> object:
    # kafka-python answers with dicts or with named tuples, depending on its version.
    for name in names:
        if isinstance(item, dict) and name in item:
            return item[name]
        if hasattr(item, name):
            return getattr(item, name)
    raise KeyError(f"none of {names} in {item!r}")


def produce_one(producer: Producer, topic: str, value: bytes, timeout: float = 20.0) -> KafkaError | None:
    """Send one record and wait for its delivery report: None if acknowledged, else the error."""
    outcome: list[KafkaError | None] = []
    producer.produce(topic, value=value, partition=0, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(timeout)
    assert outcome, f"no delivery report for a record to {topic} within {timeout}s"
    return outcome[0]


def read_all(bootstrap: str, topic: str, expected: int, group: str | None = None,
             commit: bool = False) -> list[bytes]:
    """Read ``topic``'s partition 0 from the start until ``expected`` records arrived (or 30 s)."""
    settings = {"bootstrap.servers": bootstrap, "group.id": group or f"reader-{topic}-{time.monotonic_ns()}",
                "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    consumer = Consumer(settings)
    values: list[bytes] = []
    try:
        if group is not None:
            consumer.subscribe([topic])
        else:
            consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error() is not None:
                continue
            values.append(msg.value())
        if commit:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values


def committed_offset(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                [tp] = consumer.committed([TopicPartition(topic, 0)], timeout=20)
                return tp.offset
            except KafkaException as exc:
                # Right after the offsets topic is made, its coordinator may still be loading.
                retriable = exc.args[0].code() in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
                if not retriable or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def metric(url: str, name: str) -> float:
    with urllib.request.urlopen(url, timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not exported")


def test_a_full_log_dir_goes_offline_and_the_rest_keeps_working(
    small_disk: Path, broker_factory  # type: ignore[no-untyped-def]  # the broker stops before the unmount
) -> None:
    broker: BrokerProcess = broker_factory(start=False, overrides={
        "offsets.topic.num.partitions": 1,
        "offsets.topic.replication.factor": 1,
    })
    healthy_dir = broker.data_dir.resolve()
    small_dir = small_disk.resolve()
    # The data directory first: it holds the metadata log, and new partitions go to the directory
    # with the fewest partitions (ties: the first), which makes the layout below predictable.
    broker.overrides["log.dirs"] = f"{healthy_dir},{small_dir}"
    broker.start()
    bootstrap = broker.bootstrap

    # __consumer_offsets -> data dir (0:0), "doomed" -> small disk (1:0), "steady" -> data dir (1:1).
    assert committed_offset(bootstrap, "steady-group", "steady") < 0  # FindCoordinator makes the topic
    create_topic(bootstrap, "doomed")
    create_topic(bootstrap, "steady")
    layout = log_dir_layout(bootstrap)
    assert layout[str(small_dir)] == (0, {"doomed"}), layout
    assert layout[str(healthy_dir)][0] == 0 and {"steady", "__consumer_offsets"} <= layout[str(healthy_dir)][1]

    ballast = fill_to_leave(small_dir, ROOM_BYTES)
    # One attempt per record: a storage error is retriable, and retries would only repeat it.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0,
                         "enable.idempotence": False, "linger.ms": 0, "message.timeout.ms": 15000})
    acknowledged: list[bytes] = []
    failure: KafkaError | None = None
    for n in range(4 * ROOM_BYTES // RECORD_BYTES):
        value = f"{n:06d}".encode() + os.urandom(RECORD_BYTES // 2).hex().encode()[: RECORD_BYTES - 6]
        failure = produce_one(producer, "doomed", value)
        if failure is not None:
            break
        acknowledged.append(value)
    assert failure is not None, "the small disk never filled up"
    assert failure.code() == KAFKA_STORAGE_ERROR, failure
    assert len(acknowledged) >= 5, "the disk filled before the test could write anything"

    # The directory is offline; the other one is not.
    layout = log_dir_layout(bootstrap)
    assert layout[str(small_dir)][0] == KAFKA_STORAGE_ERROR, layout
    assert layout[str(healthy_dir)][0] == 0, layout
    # Riverlog's own signals a person acts on: the metric and the log line.
    if broker.metrics_url is not None:
        assert metric(broker.metrics_url, "riverlog_offline_log_dirs_count") == 1
        assert f"log directory {small_dir} is offline" in broker.log_path.read_text()

    # The rest keeps working: records in and out of the other directory, a group commits.
    steady = [f"steady-{n}".encode() for n in range(20)]
    for value in steady:
        assert produce_one(producer, "steady", value) is None
    assert read_all(bootstrap, "steady", len(steady), group="steady-group", commit=True) == steady
    assert committed_offset(bootstrap, "steady-group", "steady") == len(steady)
    assert produce_one(producer, "doomed", b"after the failure") is not None

    # Space freed, broker restarted: everything acknowledged is back.
    ballast.unlink()
    broker.restart()
    layout = log_dir_layout(broker.bootstrap)
    assert layout[str(small_dir)] == (0, {"doomed"}), layout
    values = read_all(broker.bootstrap, "doomed", len(acknowledged))
    assert values[: len(acknowledged)] == acknowledged
    assert committed_offset(broker.bootstrap, "steady-group", "steady") == len(steady)
    with contextlib.suppress(Exception):
        producer.flush(1)
    code = broker.stop()
    assert code == (143 if broker.target == "kafka" else 0)  # the JVM exits 128+SIGTERM when it stops
    if broker.target == "riverlog":
        # Neither the failure nor the shutdown after it is a crash.
        assert "Traceback" not in broker.log_path.read_text()
