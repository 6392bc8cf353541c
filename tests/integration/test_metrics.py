"""Prometheus metrics and health endpoints of a live broker, driven by a real client."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from support.clients import wait_until

pytestmark = pytest.mark.integration


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def sample_value(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text format, matching all given labels."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {name} {labels} in metrics")


def test_metrics_and_health(broker_factory, broker_target) -> None:
    if broker_target != "riverlog":
        pytest.fail("metrics endpoints are Riverlog's own; run this test against Riverlog")
    broker = broker_factory()
    base = broker.metrics_url.removesuffix("/metrics")
    assert get(base + "/healthz") == (200, "ok\n")
    assert get(base + "/readyz") == (200, "ready\n")

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("metered", 2, 1)])["metered"].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(25):
        producer.produce("metered", value=b"x" * 100, partition=i % 2)
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "m", "enable.auto.commit": False})
    consumer.assign([TopicPartition("metered", 0, 0), TopicPartition("metered", 1, 0)])
    got = 0
    for _ in range(50):
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got += 1
        if got == 25:
            break
    consumer.close()
    assert got == 25

    status, text = get(broker.metrics_url)
    assert status == 200
    assert sample_value(text, "riverlog_requests_total", api="Produce") >= 1
    assert sample_value(text, "riverlog_requests_total", api="Fetch") >= 1
    assert sample_value(text, "riverlog_requests_total", api="Metadata") >= 1
    assert sample_value(text, "riverlog_request_latency_seconds_count", api="Produce") >= 1
    assert sample_value(text, "riverlog_records_in_total", topic="metered") == 25
    assert sample_value(text, "riverlog_bytes_in_total", topic="metered") > 25 * 100
    assert sample_value(text, "riverlog_bytes_out_total", topic="metered") > 25 * 100
    # The consumer's group.id made librdkafka look up its coordinator, which creates the
    # internal __consumer_offsets topic (as on Kafka): its partitions are hosted here too.
    offsets_partitions = len(re.findall(r'^riverlog_log_end_offset\{[^}]*topic="__consumer_offsets"', text, re.M))
    assert sample_value(text, "riverlog_partitions") == 2 + offsets_partitions
    sizes = [sample_value(text, "riverlog_log_size_bytes", topic="metered", partition=str(p)) for p in (0, 1)]
    assert all(size > 0 for size in sizes)
    assert sample_value(text, "riverlog_log_end_offset", topic="metered", partition="0") + sample_value(
        text, "riverlog_log_end_offset", topic="metered", partition="1") == 25
    assert re.search(r"^process_resident_memory_bytes ", text, re.M)
    # A single broker is its own active controller, and every partition has its leader.
    assert sample_value(text, "riverlog_active_controller_count") == 1
    assert sample_value(text, "riverlog_offline_partitions_count") == 0


def test_transaction_metrics(broker_factory, broker_target) -> None:
    """The transaction metrics after an open, a committed and an aborted transaction (confluent-kafka
    as the client): open transactions and the oldest one's age, the last-stable-offset lag (high
    watermark minus LSO) while one is open and after, marker latency per result, load times."""
    if broker_target != "riverlog":
        pytest.fail("metrics endpoints are Riverlog's own; run this test against Riverlog")
    broker = broker_factory(overrides={"transaction.state.log.num.partitions": 2, "offsets.topic.num.partitions": 1})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("txn-metered", 1, 1)])["txn-metered"].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "metered-1", "linger.ms": 0})
    producer.init_transactions(30)

    def scrape() -> str:
        status, text = get(broker.metrics_url)
        assert status == 200
        return text

    def open_count(text: str) -> float:
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("riverlog_transactions_open{"))

    # Loading each __transaction_state partition was timed once.
    text = wait_until(lambda: (t := scrape()) and sample_value(
        t, "riverlog_coordinator_load_seconds_count", coordinator="transaction") == 2 and t,
        timeout=15, message="both __transaction_state partitions loaded")
    assert open_count(text) == 0
    assert sample_value(text, "riverlog_transaction_oldest_open_seconds") == 0

    # An open transaction: 3 records the LSO holds back.
    producer.begin_transaction()
    for i in range(3):
        producer.produce("txn-metered", value=b"v%d" % i, partition=0)
    assert producer.flush(15) == 0
    time.sleep(0.2)
    text = scrape()
    assert open_count(text) == 1
    assert sample_value(text, "riverlog_transaction_oldest_open_seconds") > 0
    assert sample_value(text, "riverlog_last_stable_offset_lag", topic="txn-metered", partition="0") == 3
    producer.commit_transaction(30)

    producer.begin_transaction()
    producer.produce("txn-metered", value=b"gone", partition=0)
    assert producer.flush(15) == 0
    producer.abort_transaction(30)

    # Complete* is written after EndTxn is answered: wait for both to be counted.
    def settled() -> str | None:
        text = scrape()
        done = [sample_value(text, "riverlog_transaction_marker_latency_seconds_count", result=r)
                for r in ("commit", "abort")]
        return text if done == [1, 1] else None

    text = wait_until(settled, timeout=15, message="marker latency of one commit and one abort")
    assert 0 <= sample_value(text, "riverlog_transaction_marker_latency_seconds_sum", result="commit") < 10
    assert 0 <= sample_value(text, "riverlog_transaction_marker_latency_seconds_sum", result="abort") < 10
    assert open_count(text) == 0
    assert sample_value(text, "riverlog_transaction_oldest_open_seconds") == 0
    # Both markers written: nothing held back (3 records, a commit marker, 1 record, an abort marker).
    assert sample_value(text, "riverlog_high_watermark", topic="txn-metered", partition="0") == 6
    assert sample_value(text, "riverlog_last_stable_offset_lag", topic="txn-metered", partition="0") == 0
