"""Apache Kafka's own command-line tools against the broker.

Operators reach for kafka-topics, kafka-console-producer and kafka-console-consumer first; they
use the Java client, whose protocol choices differ from the Python clients' and librdkafka's.
The tools run as their Kafka 4.x main classes (see support/java_tools.py).
"""

from __future__ import annotations

import re

import pytest
from support.brokers import BrokerProcess
from support.clients import latest_offsets
from support.java_tools import JavaTools

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

TOPIC = "java-tools"
PARTITIONS = 3
RECORDS = 30


def test_topics_and_console_tools(broker: BrokerProcess, java_tools: JavaTools) -> None:
    bootstrap = broker.bootstrap

    created = java_tools.topics(
        bootstrap,
        "--create", "--topic", TOPIC, "--partitions", str(PARTITIONS), "--replication-factor", "1",
    )
    assert f"Created topic {TOPIC}." in created.stdout, created.describe()

    listed = java_tools.topics(bootstrap, "--list")
    assert TOPIC in listed.stdout.split(), listed.describe()

    described = java_tools.topics(bootstrap, "--describe", "--topic", TOPIC)
    summary = re.search(
        rf"Topic:\s*{TOPIC}\s.*PartitionCount:\s*(\d+)\s.*ReplicationFactor:\s*(\d+)", described.stdout
    )
    assert summary is not None, described.describe()
    assert summary.groups() == (str(PARTITIONS), "1"), described.describe()
    rows = re.findall(
        rf"Topic:\s*{TOPIC}\s+Partition:\s*(\d+)\s+Leader:\s*(\d+)\s+Replicas:\s*(\d+)\s+Isr:\s*(\d+)",
        described.stdout,
    )
    node = str(broker.node_id)
    assert sorted(rows) == [(str(p), node, node, node) for p in range(PARTITIONS)], described.describe()

    # Keyed lines "key:value"; the Java producer's default partitioner spreads keys by murmur2.
    keys = [f"key-{i % 7}" for i in range(RECORDS)]
    lines = [f"{k}:value-{i}" for i, k in enumerate(keys)]
    java_tools.console_producer(
        bootstrap,
        TOPIC,
        lines,
        "--reader-property", "parse.key=true",
        "--reader-property", "key.separator=:",
        "--command-property", "acks=all",
    )

    # Each record acknowledged: the log end offsets add up to what was written.
    ends = latest_offsets(bootstrap, TOPIC, range(PARTITIONS))
    assert sum(ends.values()) == RECORDS, ends

    # kafka-get-offsets (GetOffsetShell) prints topic:partition:offset, latest by default.
    offsets = java_tools.get_offsets(bootstrap, "--topic", TOPIC)
    printed = dict(
        (int(p), int(o)) for p, o in re.findall(rf"^{TOPIC}:(\d+):(\d+)$", offsets.stdout, re.MULTILINE)
    )
    assert printed == ends, offsets.describe()

    # Read each partition with an explicit --partition: the console consumer then assigns the
    # partition itself and needs no consumer group (groups are a later milestone).
    consumed: list[tuple[str, str]] = []
    for p in range(PARTITIONS):
        if ends[p] == 0:
            continue
        result = java_tools.console_consumer(
            bootstrap,
            TOPIC,
            "--partition", str(p),
            "--from-beginning",
            "--max-messages", str(ends[p]),
            "--timeout-ms", "30000",
            "--formatter-property", "print.key=true",
            "--formatter-property", "key.separator=|",
        )
        got = [tuple(line.split("|", 1)) for line in result.stdout.splitlines() if line]
        assert len(got) == ends[p], result.describe()
        assert f"Processed a total of {ends[p]} messages" in result.stderr, result.describe()
        # Within a partition, lines come back in the order they were written.
        indexes = [int(value.removeprefix("value-")) for _, value in got]
        assert indexes == sorted(indexes), f"partition {p} out of order: {got}"
        # All records of one key live in one partition.
        assert {k for k, _ in got}.isdisjoint({k for k, _ in consumed}), "a key spans partitions"
        consumed.extend(got)  # type: ignore[arg-type]

    assert sorted(consumed) == sorted((k, f"value-{i}") for i, k in enumerate(keys))
    broker.assert_alive()
