"""``share.isolation.level`` (a group config): a share group reading a topic written by
transactional producers, with Java's KafkaShareConsumer -- on Riverlog as on Kafka 4.3.1.

A confluent-kafka transactional producer commits one transaction, aborts one, and leaves a third
open while a plain producer writes after it. A read_committed share group gets the committed
records only, and nothing past the open transaction until it commits; a read_uncommitted group
(the default) gets every record, the aborted ones too. Both groups end with no lag: the aborted
records and the transaction markers count as done.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from support.brokers import BrokerProcess
from support.java_programs import JavaPrograms, JavaSession
from support.java_tools import JavaTools
from support.share_client import WAIT_S, poll

pytestmark = pytest.mark.integration

TOPIC = "txq"
COMMITTED, UNCOMMITTED = "rc-group", "ru-group"


def set_group_configs(tools: JavaTools, broker: BrokerProcess, group: str, configs: str) -> None:
    result = tools.configs(broker.bootstrap, "--entity-type", "groups", "--entity-name", group, "--alter",
                           "--add-config", configs, check=False)
    assert result.returncode == 0, result.describe()


def transactional(bootstrap: str, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0})
    producer.init_transactions(30)
    return producer


def write(producer: Producer, *values: str) -> None:
    for v in values:
        producer.produce(TOPIC, v.encode(), partition=0)
    producer.flush(30)


def read_until(s: JavaSession, consumer: str, wanted: set[str], got: list[str]) -> None:
    """Poll (accepting everything) until every value of ``wanted`` came; ``got`` keeps them all."""
    deadline = time.monotonic() + WAIT_S
    while not wanted <= set(got):
        assert time.monotonic() < deadline, f"{consumer} got {got}, waits for {sorted(wanted - set(got))}"
        got.extend(r["value"] for r in poll(s, consumer))


def lags(s: JavaSession, group: str) -> dict[int, int]:
    answer: dict[str, Any] = s.call("offsets", group)
    return {p["partition"]: p["lag"] for p in answer["partitions"] if p["topic"] == TOPIC}


def test_a_read_committed_share_group_skips_aborted_and_waits_for_open_transactions(
        broker: BrokerProcess, java_tools: JavaTools, kafka_libs: Path, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(15)
    set_group_configs(java_tools, broker, COMMITTED, "share.auto.offset.reset=earliest,"
                                                     "share.isolation.level=read_committed")
    set_group_configs(java_tools, broker, UNCOMMITTED, "share.auto.offset.reset=earliest")
    described = java_tools.configs(broker.bootstrap, "--entity-type", "groups", "--entity-name", COMMITTED,
                                   "--describe").stdout
    assert "share.isolation.level=read_committed" in described, described

    txn = transactional(broker.bootstrap, "share-rc")
    plain = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    txn.begin_transaction()
    write(txn, "committed-1", "committed-2")
    txn.commit_transaction(30)
    txn.begin_transaction()
    write(txn, "aborted-1", "aborted-2")
    txn.abort_transaction(30)
    txn.begin_transaction()
    write(txn, "open-1")  # left open for now
    write(plain, "plain-after-open")

    programs = JavaPrograms(kafka_libs)
    with programs.session("ShareClient", [broker.bootstrap], log_path=tmp_path / "client.log") as s:
        s.call("consumer", "rc", COMMITTED, TOPIC)
        s.call("consumer", "ru", UNCOMMITTED, TOPIC)
        committed: list[str] = []
        uncommitted: list[str] = []
        read_until(s, "rc", {"committed-1", "committed-2"}, committed)
        read_until(s, "ru", {"committed-1", "committed-2", "aborted-1", "aborted-2", "open-1",
                             "plain-after-open"}, uncommitted)
        # The open transaction holds the read_committed group at its first record: a few more
        # polls give it nothing past it.
        for _ in range(4):
            committed.extend(r["value"] for r in poll(s, "rc"))
        assert committed == ["committed-1", "committed-2"], committed
        txn.commit_transaction(30)
        read_until(s, "rc", {"open-1", "plain-after-open"}, committed)
        assert sorted(committed) == ["committed-1", "committed-2", "open-1", "plain-after-open"], committed
        assert sorted(uncommitted) == ["aborted-1", "aborted-2", "committed-1", "committed-2", "open-1",
                                       "plain-after-open"], uncommitted
        # Aborted records and markers are done too: both groups drain to no lag.
        deadline = time.monotonic() + WAIT_S
        while lags(s, COMMITTED) != {0: 0} or lags(s, UNCOMMITTED) != {0: 0}:
            assert time.monotonic() < deadline, (lags(s, COMMITTED), lags(s, UNCOMMITTED))
            poll(s, "rc")
            poll(s, "ru")
