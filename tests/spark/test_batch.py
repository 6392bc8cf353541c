"""Acceptance 3: the batch pipeline writes exactly the records of the requested offset range (and,
with times, of the range the broker's timestamp lookup gives) to Parquet, partitioned by date; of
a transactional topic, only the committed transactions' records (read_committed, issue #16).

The records straddle midnight UTC, so the export has two date partitions; the expected rows come
from reading the topic with librdkafka, the actual ones from the Parquet files with pyarrow.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from support.brokers import BrokerProcess
from support.spark_run import Record, create_topic, produce, read_topic, riverlog_spark, run
from support.txn_checks import READ_COMMITTED, read_all, wait_stable

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

TOPIC = "batch-source"
START_MS = 1_767_225_540_000  # 2025-12-31T23:59:00Z
STEP_MS = 300
COUNT = 400  # two minutes of records: 23:59:00 to 00:00:59.7


def _date(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d")


@pytest.fixture(scope="module")
def source(spark_broker: BrokerProcess) -> list[Record]:
    create_topic(spark_broker.bootstrap, TOPIC, 2)
    produce(spark_broker.bootstrap, TOPIC, [
        (f"k-{i:04d}".encode(), f'{{"n":{i}}}'.encode(), i % 2, START_MS + i * STEP_MS) for i in range(COUNT)
    ])
    records = read_topic(spark_broker.bootstrap, TOPIC)
    assert len(records) == COUNT
    return records


def parquet_rows(path: Path) -> set[tuple[object, ...]]:
    rows = set()
    for row in pq.read_table(path).to_pylist():
        timestamp = row["timestamp"].replace(tzinfo=UTC) if row["timestamp"].tzinfo is None else row["timestamp"]
        ms = round(timestamp.timestamp() * 1000)
        assert row["topic"] == TOPIC
        # The date column is the partition directory: the record timestamp's UTC day.
        assert str(row["date"]) == _date(ms)
        rows.add((row["partition"], row["offset"], ms, row["key"], row["value"]))
    return rows


def expected_rows(records: list[Record]) -> set[tuple[object, ...]]:
    return {(r.partition, r.offset, r.timestamp, (r.key or b"").decode(), (r.value or b"").decode()) for r in records}


def export(broker: BrokerProcess, out: Path, *selection: str) -> None:
    run(riverlog_spark("run", "batch", "--bootstrap", broker.bootstrap, "--topic", TOPIC,
                       "--output", str(out), *selection), out.parent / f"{out.name}.log", cwd=out.parent)


def test_offset_range_to_parquet_by_date(spark_broker: BrokerProcess, source: list[Record], tmp_path: Path) -> None:
    out = tmp_path / "by-offsets"
    export(spark_broker, out, "--range", "0:20:150", "--range", "1:0:90")
    wanted = [r for r in source if (r.partition == 0 and 20 <= r.offset < 150) or (r.partition == 1 and r.offset < 90)]
    assert len(wanted) == 130 + 90
    rows = parquet_rows(out)
    assert rows == expected_rows(wanted)
    dates = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert dates == ["date=2025-12-31", "date=2026-01-01"]


def test_time_range_to_parquet(spark_broker: BrokerProcess, source: list[Record], tmp_path: Path) -> None:
    out = tmp_path / "by-time"
    start, end = START_MS + 30_000, START_MS + 90_000  # 23:59:30 to 00:00:30
    export(spark_broker, out, "--from-time", "2025-12-31T23:59:30Z", "--to-time", str(end))
    # Per partition, from the first record at or after the start to the first at or after the
    # end (timestamps grow with offsets here, so that is the records in [start, end)).
    wanted = [r for r in source if start <= r.timestamp < end]
    assert len(wanted) == 200
    assert parquet_rows(out) == expected_rows(wanted)


def test_aborted_transaction_is_not_exported(spark_broker: BrokerProcess, tmp_path: Path) -> None:
    """The pipelines read with kafka.isolation.level=read_committed: an aborted transaction's
    records are not exported, those of the committed transactions around it are."""
    topic = "batch-txn"
    create_topic(spark_broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": spark_broker.bootstrap, "transactional.id": "batch-txn",
                         "linger.ms": 5, "log_level": 3})
    producer.init_transactions(60)
    for outcome, values in (("commit", ["c0", "c1", "c2"]), ("abort", ["a0", "a1"]), ("commit", ["c3"])):
        producer.begin_transaction()
        for v in values:
            producer.produce(topic, value=v.encode(), key=v.encode(), partition=0, timestamp=START_MS)
        assert producer.flush(60) == 0
        (producer.commit_transaction if outcome == "commit" else producer.abort_transaction)(60)
    wait_stable(spark_broker.bootstrap, {topic: 1})
    committed = read_all(spark_broker.bootstrap, {topic: 1}, READ_COMMITTED)
    assert committed.values() == ["c0", "c1", "c2", "c3"]

    out = tmp_path / "txn"
    run(riverlog_spark("run", "batch", "--bootstrap", spark_broker.bootstrap, "--topic", topic,
                       "--output", str(out)), tmp_path / "txn.log", cwd=tmp_path)
    rows = sorted((row["offset"], row["value"]) for row in pq.read_table(out).to_pylist())
    assert rows == [(r.offset, r.value) for r in committed.records]
