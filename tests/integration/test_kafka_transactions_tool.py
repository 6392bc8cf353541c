"""Kafka's own ``kafka-transactions.sh`` (``org.apache.kafka.tools.TransactionsCommand``) against
the broker: list, describe, describe-producers, find-hanging and abort, each checked on what it
prints.

Transactions are made by confluent-kafka's transactional producer (one committed, one aborted,
one left open) and by raw requests (a hanging transaction no coordinator knows of, see
``support/hanging_txn.py``). The tool finds the hanging one and not the open one, aborts it by
its start offset, and read_committed consumers then move past it.

Runs against Riverlog by default, or Apache Kafka with RIVERLOG_TEST_TARGET=kafka.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaException, Producer
from support.brokers import BrokerProcess
from support.clients import create_topic
from support.hanging_txn import HANGING_SETTINGS, Hanging, make_hanging_transaction
from support.java_tools import JavaTools, ToolResult
from support.txn_checks import READ_COMMITTED, TXN_BROKER_SETTINGS, read_all, wait_stable

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CALL_TIMEOUT = 60.0
TOPIC = "tool-txn"
HANGING_TOPIC = "tool-txn-hanging"
TXN_TIMEOUT_MS = 300_000


def rows(result: ToolResult, first_column: str) -> list[dict[str, str]]:
    """The tool's table (``ToolsUtils.prettyPrintTable``): a header line, then one line per row;
    no cell of these tests has a space, and only the last may be empty (a finished transaction's
    TopicPartitions)."""
    lines = [line.split() for line in result.stdout.splitlines() if line.strip()]
    header = next((i for i, cols in enumerate(lines) if cols and cols[0] == first_column), None)
    assert header is not None, result.describe()
    names = lines[header]
    out = []
    for cols in lines[header + 1:]:
        assert len(names) - 1 <= len(cols) <= len(names), result.describe()
        out.append(dict(zip(names, [*cols, ""], strict=False)))
    return out


def producer(bootstrap: str, transactional_id: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5,
                  "transaction.timeout.ms": TXN_TIMEOUT_MS, "log_level": 3})
    p.init_transactions(CALL_TIMEOUT)
    return p


def send(p: Producer, partition: int, *values: str) -> None:
    for v in values:
        p.produce(TOPIC, value=v.encode(), key=b"k", partition=partition)
    assert p.flush(CALL_TIMEOUT) == 0


class Scenario:
    def __init__(self, broker: BrokerProcess, hanging: Hanging) -> None:
        self.broker = broker
        self.bootstrap = broker.bootstrap
        self.hanging = hanging


@pytest.fixture(scope="module")
def scenario(module_broker_factory: Callable[..., BrokerProcess]) -> Iterator[Scenario]:
    settings = {**TXN_BROKER_SETTINGS, **HANGING_SETTINGS}  # so a hanging transaction can be made
    broker = module_broker_factory(settings)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, TOPIC, 2)
    create_topic(bootstrap, HANGING_TOPIC, 1)
    committed = producer(bootstrap, "tool-committed")
    committed.begin_transaction()
    send(committed, 0, "c1", "c2")
    committed.commit_transaction(CALL_TIMEOUT)
    aborted = producer(bootstrap, "tool-aborted")
    aborted.begin_transaction()
    send(aborted, 0, "a1")
    aborted.abort_transaction(CALL_TIMEOUT)
    del committed, aborted  # destroyed while the broker still runs (no reconnect noise at teardown)
    wait_stable(bootstrap, {TOPIC: 2})
    opened = producer(bootstrap, "tool-open")
    opened.begin_transaction()
    send(opened, 1, "o1", "o2", "o3")
    hanging = make_hanging_transaction(bootstrap, HANGING_TOPIC, 0, ["h1", "h2"])
    yield Scenario(broker, hanging)
    # The test may have aborted its partition behind its back; the broker goes anyway.
    with contextlib.suppress(KafkaException):
        opened.abort_transaction(10)


def test_list(scenario: Scenario, java_tools: JavaTools) -> None:
    listed = java_tools.transactions(scenario.bootstrap, "list")
    found = {r["TransactionalId"]: r for r in rows(listed, "TransactionalId")}
    assert {k: r["TransactionState"] for k, r in found.items()} == {
        "tool-committed": "CompleteCommit", "tool-aborted": "CompleteAbort", "tool-open": "Ongoing",
    }, listed.describe()
    assert len({r["ProducerId"] for r in found.values()}) == 3, listed.describe()
    assert {r["Coordinator"] for r in found.values()} == {"1"}, listed.describe()

    # Only transactions running longer than the filter: a started one, not those long finished.
    long_running = java_tools.transactions(scenario.bootstrap, "list", "--duration-filter", "3600000")
    assert rows(long_running, "TransactionalId") == [], long_running.describe()
    pattern = java_tools.transactions(scenario.bootstrap, "list", "--transactional-id-pattern", "tool-(open|aborted)")
    assert sorted(r["TransactionalId"] for r in rows(pattern, "TransactionalId")) == [
        "tool-aborted", "tool-open"], pattern.describe()


def test_describe(scenario: Scenario, java_tools: JavaTools) -> None:
    described = java_tools.transactions(scenario.bootstrap, "describe", "--transactional-id", "tool-open")
    (row,) = rows(described, "CoordinatorId")
    assert row["TransactionalId"] == "tool-open", described.describe()
    assert row["TransactionState"] == "Ongoing", described.describe()
    assert row["TransactionTimeoutMs"] == str(TXN_TIMEOUT_MS), described.describe()
    assert row["TopicPartitions"] == f"{TOPIC}-1", described.describe()
    assert int(row["CurrentTransactionStartTimeMs"]) > 0, described.describe()
    assert int(row["TransactionDurationMs"]) >= 0, described.describe()

    done = java_tools.transactions(scenario.bootstrap, "describe", "--transactional-id", "tool-committed")
    (row,) = rows(done, "CoordinatorId")
    assert row["TransactionState"] == "CompleteCommit", done.describe()
    assert row["TopicPartitions"] == "", done.describe()

    missing = java_tools.transactions(scenario.bootstrap, "describe", "--transactional-id", "no-such-txn",
                                      check=False)
    assert missing.returncode != 0, missing.describe()
    assert "`no-such-txn` failed because the ID could not be found" in missing.stderr, missing.describe()


def test_describe_producers(scenario: Scenario, java_tools: JavaTools) -> None:
    described = java_tools.transactions(scenario.bootstrap, "describe-producers", "--topic", TOPIC,
                                        "--partition", "1")
    (row,) = rows(described, "ProducerId")
    assert row["CurrentTransactionStartOffset"] == "0", described.describe()
    assert row["LastSequence"] == "2", described.describe()

    hanging = java_tools.transactions(scenario.bootstrap, "describe-producers", "--topic", HANGING_TOPIC,
                                      "--partition", "0")
    (row,) = rows(hanging, "ProducerId")
    assert row["ProducerId"] == str(scenario.hanging.producer_id), hanging.describe()
    assert row["CurrentTransactionStartOffset"] == str(scenario.hanging.start_offset), hanging.describe()


def test_find_hanging_then_abort(scenario: Scenario, java_tools: JavaTools) -> None:
    bootstrap, hanging = scenario.bootstrap, scenario.hanging
    # --max-transaction-timeout 0: every open transaction is a candidate; the open one of
    # tool-open is known to its coordinator (Ongoing, with that partition), so it is not hanging.
    open_one = java_tools.transactions(bootstrap, "find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0")
    assert rows(open_one, "Topic") == [], open_one.describe()
    found = java_tools.transactions(bootstrap, "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0")
    (row,) = rows(found, "Topic")
    assert (row["Topic"], row["Partition"], row["ProducerId"], row["StartOffset"]) == (
        HANGING_TOPIC, "0", str(hanging.producer_id), str(hanging.start_offset)), found.describe()
    # With the default 15 minutes, a transaction this young is not suspected yet.
    young = java_tools.transactions(bootstrap, "find-hanging", "--topic", HANGING_TOPIC)
    assert rows(young, "Topic") == [], young.describe()

    assert read_all(bootstrap, {HANGING_TOPIC: 1}, READ_COMMITTED).ends == {(HANGING_TOPIC, 0): hanging.start_offset}
    wrong = java_tools.transactions(bootstrap, "abort", "--topic", HANGING_TOPIC, "--partition", "0",
                                    "--start-offset", str(hanging.start_offset + 1), check=False)
    assert wrong.returncode != 0, wrong.describe()
    assert f"Could not find any open transactions starting at offset {hanging.start_offset + 1}" in (
        wrong.stdout + wrong.stderr), wrong.describe()

    java_tools.transactions(bootstrap, "abort", "--topic", HANGING_TOPIC, "--partition", "0",
                            "--start-offset", str(hanging.start_offset))
    assert wait_stable(bootstrap, {HANGING_TOPIC: 1}) == {(HANGING_TOPIC, 0): hanging.start_offset + 3}
    read = read_all(bootstrap, {HANGING_TOPIC: 1}, READ_COMMITTED)
    assert read.records == [] and read.ends == {(HANGING_TOPIC, 0): hanging.start_offset + 3}
    after = java_tools.transactions(bootstrap, "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0")
    assert rows(after, "Topic") == [], after.describe()
    producers = java_tools.transactions(bootstrap, "describe-producers", "--topic", HANGING_TOPIC, "--partition", "0")
    assert {r["CurrentTransactionStartOffset"] for r in rows(producers, "ProducerId")} == {"None"}, (
        producers.describe())
