"""The ``riverlog`` CLI's topics / produce / consume commands against a real broker process.

Every command runs as a subprocess (``python -m riverlog ...``), exactly as a person would run
it, and its output is checked in both formats. What the CLI produces is read back with
confluent-kafka (librdkafka) and what confluent-kafka produces is read with the CLI, so the two
agree on record format, headers and key partitioning (both use Kafka's murmur2 partitioner).
Expected failures must print one clear line on stderr, exit non-zero and never a traceback.

Runs against Riverlog by default, or Apache Kafka with RIVERLOG_TEST_TARGET=kafka.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Message, TopicPartition
from confluent_kafka import Producer as CKProducer
from riverlog.client.partitioner import partition_for_key
from support.brokers import BrokerProcess, free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO_ROOT = Path(__file__).resolve().parents[2]
CLI_TIMEOUT = 60.0


def cli(*args: str, stdin: str | None = None, timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT / "broker_image")
    env.pop("RIVERLOG_BOOTSTRAP", None)
    return subprocess.run(
        [sys.executable, "-m", "riverlog", *args],
        input=stdin, capture_output=True, text=True, timeout=timeout, env=env,
    )


def ok(*args: str, stdin: str | None = None) -> str:
    """Run the CLI, fail the test with its stderr unless it exits 0; return its stdout."""
    result = cli(*args, stdin=stdin)
    assert result.returncode == 0, f"riverlog {' '.join(args)} exited {result.returncode}:\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout


def fails(*args: str, stdin: str | None = None) -> str:
    """Run the CLI expecting an expected failure: non-zero exit, one clear line, no traceback."""
    result = cli(*args, stdin=stdin)
    assert result.returncode != 0, f"riverlog {' '.join(args)} succeeded:\n{result.stdout}"
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("riverlog: error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def table_rows(text: str) -> list[list[str]]:
    """Rows of a table printed by the CLI (header first), split on runs of spaces."""
    return [line.split() for line in text.splitlines() if line.strip()]


def boot(broker: BrokerProcess) -> list[str]:
    return ["--bootstrap-server", broker.bootstrap]


def split_lines(lines: Sequence[str]) -> list[tuple[str, str]]:
    """``KEY:VALUE`` lines as (key, value), split at the first colon as the CLI does."""
    return [(line.split(":", 1)[0], line.split(":", 1)[1]) for line in lines]


def consume_json(broker: BrokerProcess, topic: str, count: int, *extra: str) -> list[dict]:
    out = ok("consume", topic, *boot(broker), "--from-beginning", "--max-messages", str(count),
             "--timeout-ms", "15000", "--output", "json", *extra)
    return json_lines(out)


# --- topics ---------------------------------------------------------------------------------------


def test_topic_lifecycle(broker: BrokerProcess) -> None:
    out = ok("topics", "create", "orders", *boot(broker), "--partitions", "3", "--replication-factor", "1",
             "--config", "retention.ms=3600000")
    header, row = table_rows(out)
    assert header == ["TOPIC", "PARTITIONS", "REPLICATION_FACTOR", "TOPIC_ID"]
    assert row[:3] == ["orders", "3", "1"]

    created = json_lines(ok("topics", "create", "audit", *boot(broker), "--partitions", "1", "--output", "json"))
    assert created[0]["name"] == "audit" and created[0]["partitions"] == 1

    listed = {r[0]: r for r in table_rows(ok("topics", "list", *boot(broker)))[1:]}
    assert listed["orders"][1:3] == ["3", "1"] and "audit" in listed
    listed_json = {d["name"]: d for d in json_lines(ok("topics", "list", *boot(broker), "--output", "json"))}
    assert listed_json["orders"]["partitions"] == 3 and listed_json["orders"]["replication_factor"] == 1

    described = json_lines(ok("topics", "describe", "orders", *boot(broker), "--output", "json"))
    (doc,) = described
    assert [p["partition"] for p in doc["partitions"]] == [0, 1, 2]
    assert all(p["leader"] == broker.node_id and p["replicas"] == [broker.node_id] for p in doc["partitions"])
    assert doc["config_overrides"] == {"retention.ms": "3600000"}
    assert doc["configs"]["retention.ms"] == "3600000"
    assert all(p["start_offset"] == 0 and p["end_offset"] == 0 for p in doc["partitions"])
    text = ok("topics", "describe", "orders", *boot(broker))
    assert "retention.ms=3600000" in text and "PARTITION" in text

    ok("topics", "alter", "orders", *boot(broker), "--partitions", "5", "--config", "cleanup.policy=compact",
       "--delete-config", "retention.ms")
    (doc,) = json_lines(ok("topics", "describe", "orders", *boot(broker), "--output", "json"))
    assert len(doc["partitions"]) == 5
    assert doc["config_overrides"] == {"cleanup.policy": "compact"}

    assert "Deleted topic orders" in ok("topics", "delete", "orders", *boot(broker))
    assert json_lines(ok("topics", "delete", "audit", *boot(broker), "--output", "json")) == [
        {"name": "audit", "deleted": True}
    ]
    remaining = [d["name"] for d in json_lines(ok("topics", "list", *boot(broker), "--output", "json"))]
    assert "orders" not in remaining and "audit" not in remaining


# --- produce and consume --------------------------------------------------------------------------


def test_produce_and_consume_round_trip(broker: BrokerProcess) -> None:
    ok("topics", "create", "events", *boot(broker), "--partitions", "3")
    lines = [f"user-{i % 7}:payload {i} with spaces: and colons" for i in range(60)]
    out = ok("produce", "events", *boot(broker), "--key-separator", ":", "--header", "source=cli",
             "--header", "trace=a=b", "--output", "json", stdin="\n".join(lines) + "\n")
    summary = json_lines(out)
    assert sum(s["records"] for s in summary) == 60

    got = consume_json(broker, "events", 60)
    assert len(got) == 60
    expected = sorted(split_lines(lines))
    assert sorted((r["key"], r["value"]) for r in got) == expected
    for r in got:
        assert r["headers"] == [{"key": "source", "value": "cli"}, {"key": "trace", "value": "a=b"}]
        # Kafka's default partitioner: murmur2 of the key modulo the partition count.
        assert r["partition"] == partition_for_key(r["key"].encode(), 3)
        assert r["timestamp"] > 0 and r["timestamp_type"] == "CreateTime"
    # Per partition, offsets are dense and in production order.
    for p in range(3):
        mine = [r for r in got if r["partition"] == p]
        assert [r["offset"] for r in mine] == list(range(len(mine)))
        in_order = [v for k, v in split_lines(lines) if partition_for_key(k.encode(), 3) == p]
        assert [r["value"] for r in mine] == in_order

    # The table shows the same records with column headers.
    text = ok("consume", "events", *boot(broker), "--from-beginning", "--max-messages", "60", "--timeout-ms", "15000")
    rows = text.splitlines()
    assert rows[0].split() == ["PARTITION", "OFFSET", "TIMESTAMP", "KEY", "HEADERS", "VALUE"]
    assert len(rows) == 61
    assert any("payload 0 with spaces: and colons" in row for row in rows)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_produce_compressed_and_with_each_acks(broker: BrokerProcess, codec: str) -> None:
    ok("topics", "create", "codecs", *boot(broker), "--partitions", "1")
    for acks in ("all", "1"):
        ok("produce", "codecs", *boot(broker), "--compression", codec, "--acks", acks,
           stdin="".join(f"{codec}-{acks}-{i}\n" for i in range(50)))
    got = consume_json(broker, "codecs", 100)
    assert [r["value"] for r in got] == [f"{codec}-{a}-{i}" for a in ("all", "1") for i in range(50)]
    assert [r["key"] for r in got] == [None] * 100


def test_consume_from_a_partition_and_offset(broker: BrokerProcess) -> None:
    ok("topics", "create", "seek", *boot(broker), "--partitions", "2")
    ok("produce", "seek", *boot(broker), "--partition", "1", stdin="".join(f"m{i}\n" for i in range(10)))
    got = json_lines(ok("consume", "seek", *boot(broker), "--partition", "1", "--offset", "7",
                        "--max-messages", "3", "--timeout-ms", "15000", "--output", "json"))
    assert [(r["partition"], r["offset"], r["value"]) for r in got] == [(1, 7, "m7"), (1, 8, "m8"), (1, 9, "m9")]
    # Partition 0 is empty: an idle timeout ends the command cleanly with nothing printed.
    result = cli("consume", "seek", *boot(broker), "--partition", "0", "--from-beginning", "--timeout-ms", "500")
    assert result.returncode == 0 and result.stdout == ""
    # Asking for more records than arrive before the timeout is reported as a failure.
    result = cli("consume", "seek", *boot(broker), "--partition", "1", "--from-beginning",
                 "--max-messages", "20", "--timeout-ms", "1000", "--output", "json")
    assert result.returncode == 1 and len(json_lines(result.stdout)) == 10
    assert "10 of 20" in result.stderr


# --- cross-checks with confluent-kafka ------------------------------------------------------------


def test_confluent_kafka_reads_what_the_cli_produced(broker: BrokerProcess) -> None:
    ok("topics", "create", "to-librdkafka", *boot(broker), "--partitions", "3")
    lines = [f"k{i}|v{i}" for i in range(30)]
    ok("produce", "to-librdkafka", *boot(broker), "--key-separator", "|", "--header", "h=1", "--compression", "zstd",
       stdin="\n".join(lines))
    consumer = CKConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "cli-check",
                           "enable.auto.commit": False, "log_level": 3})
    try:
        consumer.assign([TopicPartition("to-librdkafka", p, 0) for p in range(3)])
        got: list[Message] = []
        while len(got) < 30:
            messages = consumer.consume(num_messages=30, timeout=15)
            assert messages, f"confluent-kafka read only {len(got)} of 30 records"
            for m in messages:
                assert m.error() is None, m.error()
                got.append(m)
    finally:
        consumer.close()
    by_key = {(m.key() or b"").decode(): m for m in got}
    assert sorted(by_key) == sorted(f"k{i}" for i in range(30))
    for i in range(30):
        m = by_key[f"k{i}"]
        assert m.value() == f"v{i}".encode()
        assert m.headers() == [("h", b"1")]
        assert m.partition() == partition_for_key(f"k{i}".encode(), 3)


def test_cli_reads_what_confluent_kafka_produced(broker: BrokerProcess) -> None:
    ok("topics", "create", "from-librdkafka", *boot(broker), "--partitions", "4")
    # librdkafka's murmur2 partitioner is the Java client's default one.
    producer = CKProducer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random",
                           "compression.type": "lz4", "linger.ms": 5, "log_level": 3})
    delivered: dict[str, int] = {}

    def on_delivery(err: object, msg: object) -> None:
        assert err is None, err
        delivered[msg.key().decode()] = msg.partition()  # type: ignore[attr-defined]

    for i in range(40):
        producer.produce("from-librdkafka", value=f"value {i}".encode(), key=f"key-{i}".encode(),
                         headers=[("n", str(i).encode())], on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert len(delivered) == 40

    got = consume_json(broker, "from-librdkafka", 40)
    assert len(got) == 40
    for r in got:
        i = int(r["value"].split()[1])
        assert r["key"] == f"key-{i}"
        assert r["headers"] == [{"key": "n", "value": str(i)}]
        # Same key, same partition, whichever client produced it.
        assert r["partition"] == delivered[r["key"]] == partition_for_key(r["key"].encode(), 4)


# --- expected failures ----------------------------------------------------------------------------


def test_unknown_topic_is_a_clear_error(broker: BrokerProcess) -> None:
    for args in (
        ("topics", "describe", "ghost"),
        ("topics", "delete", "ghost"),
        ("topics", "alter", "ghost", "--config", "retention.ms=1000"),
        ("consume", "ghost", "--timeout-ms", "1000"),
    ):
        line = fails(*args, *boot(broker))
        assert "topic 'ghost' does not exist" in line, line
        assert "riverlog topics create ghost" in line
    line = fails("produce", "ghost", *boot(broker), stdin="x\n")
    assert "topic 'ghost' does not exist" in line


def test_broker_rejections_are_explained(broker: BrokerProcess) -> None:
    line = fails("topics", "create", "bad-config", *boot(broker), "--config", "retention.ms=soon")
    assert "invalid config" in line and "retention.ms" in line
    ok("topics", "create", "twice", *boot(broker), "--partitions", "2")
    assert "already exists" in fails("topics", "create", "twice", *boot(broker))
    assert "invalid config" in fails("topics", "alter", "twice", *boot(broker), "--config", "retention.ms=soon")
    assert "partition" in fails("topics", "alter", "twice", *boot(broker), "--partitions", "1")
    assert "replication factor" in fails("topics", "create", "wide", *boot(broker), "--replication-factor", "3")
    assert "has no partition 5" in fails("consume", "twice", *boot(broker), "--partition", "5", "--timeout-ms", "500")
    assert "key separator" in fails("produce", "twice", *boot(broker), "--key-separator", ":", stdin="no separator\n")
    assert "--offset needs --partition" in fails("consume", "twice", *boot(broker), "--offset", "3")


def test_no_broker_listening() -> None:
    port = free_port()
    for args in (("topics", "list"), ("consume", "t", "--timeout-ms", "500")):
        line = fails(*args, "--bootstrap-server", f"127.0.0.1:{port}")
        assert f"cannot reach 127.0.0.1:{port}" in line
        assert "connection refused" in line and "is the broker running?" in line and "make run" in line
    line = fails("produce", "t", "--bootstrap-server", f"127.0.0.1:{port}", stdin="x\n")
    assert "cannot reach" in line
    # The environment variable is the default bootstrap.
    env_result = subprocess.run(
        [sys.executable, "-m", "riverlog", "topics", "list"], capture_output=True, text=True, timeout=CLI_TIMEOUT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "broker_image"), "RIVERLOG_BOOTSTRAP": f"127.0.0.1:{port}"},
    )
    assert env_result.returncode != 0 and f"cannot reach 127.0.0.1:{port}" in env_result.stderr
