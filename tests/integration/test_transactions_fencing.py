"""Acceptance 4 and 5 of issue #16: zombie fencing and the coordinator's timeout abort; and which
transaction protocol the Java client speaks (transaction version 2 bumps the epoch at every
transaction end, KIP-890 part 2).

4. A second producer with the same ``transactional.id`` fences the first: its open transaction
   is aborted when the second one initialises, and its later attempt to commit fails with
   PRODUCER_FENCED.
5. A producer that begins a transaction and goes silent: the coordinator aborts it after its
   ``transaction.timeout.ms`` and read_committed consumers move past it. The broker checks for
   timed-out transactions every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``
   (Kafka's default 10 s, shortened here; Kafka accepts the override too).

Kafka's Java client does the producing (``tests/java/TxnClient.java``); librdkafka reads.

What a producer hears when it wakes up after the timeout abort depends on the transaction
protocol the broker finalized (the ``transaction.version`` feature): with version 2 (KIP-890,
Kafka 4.x's default) its commit is refused as INVALID_TXN_STATE, with the classic protocol as
PRODUCER_FENCED. The module runs once on the broker's own choice and once with the feature at 1
(downgraded where the broker finalized more), so against Kafka both protocols are checked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.brokers import BrokerProcess
from support.clients import create_topic, wait_until
from support.java_programs import JavaPrograms, JavaSession
from support.txn_checks import READ_COMMITTED, READ_UNCOMMITTED, read_all, wait_stable

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

TXN_BROKER_SETTINGS: dict[str, object] = {
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 3,
    "transaction.state.log.num.partitions": 3,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
}
# What the Java client throws when the coordinator answers EndTxn with PRODUCER_FENCED: the
# producer's epoch is older than the transactional id's (a newer incarnation, or the classic
# protocol's timeout abort, bumped it). Kafka answers so in both protocol versions here.
FENCED = "ProducerFencedException"
TRANSACTION_VERSION = "transaction.version"


@pytest.fixture(scope="module")
def java_programs(kafka_libs: Path) -> JavaPrograms:
    programs = JavaPrograms(kafka_libs)
    programs.classes()
    return programs


@pytest.fixture(scope="module", params=["broker-default", "transaction.version=1"])
def txn_broker(
    request: pytest.FixtureRequest,
    module_broker_factory: Callable[..., BrokerProcess],
    java_programs: JavaPrograms,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[BrokerProcess, int]]:
    """A broker and the transaction version it has finalized."""
    downgrade = request.param != "broker-default"
    broker = module_broker_factory(TXN_BROKER_SETTINGS, name="broker-tv1" if downgrade else "broker")
    log = tmp_path_factory.mktemp("features") / "txn-client.log"
    with java_programs.session("TxnClient", [broker.bootstrap], log_path=log) as admin:
        level = int(admin.call("feature", TRANSACTION_VERSION)["level"])
        if downgrade and level > 1:
            admin.call("set_feature", TRANSACTION_VERSION, 1)
            wait_until(lambda: int(admin.call("feature", TRANSACTION_VERSION)["level"]) == 1,
                       timeout=30, message="transaction.version finalized at 1")
            level = 1
    yield broker, level
    broker.close()


@pytest.fixture
def bootstrap(txn_broker: tuple[BrokerProcess, int]) -> str:
    return txn_broker[0].bootstrap


@pytest.fixture
def client(java_programs: JavaPrograms, bootstrap: str, tmp_path: Path) -> Iterator[JavaSession]:
    with java_programs.session("TxnClient", [bootstrap], log_path=tmp_path / "txn-client.log") as s:
        yield s


def failed_with(answer: dict[str, Any], error: str) -> bool:
    return not answer["ok"] and answer["error"] == error


def test_second_producer_with_the_same_id_fences_the_first(bootstrap: str, client: JavaSession) -> None:
    topic = "fencing-zombie"
    topics = {topic: 2}
    create_topic(bootstrap, topic, 2)

    client.call("producer", "zombie", "fenced-id")
    client.call("init", "zombie")
    client.call("begin", "zombie")
    assert client.call("send", "zombie", topic, 0, "k", "zombie-0")["offset"] == 0
    assert client.call("send", "zombie", topic, 1, "k", "zombie-1")["offset"] == 0

    # The new incarnation's InitProducerId aborts the zombie's open transaction (its abort
    # markers land at offset 1 of both partitions before the call returns) and bumps the epoch.
    client.call("producer", "successor", "fenced-id")
    client.call("init", "successor")
    client.call("begin", "successor")
    assert client.call("send", "successor", topic, 0, "k", "successor-0")["offset"] == 2
    client.call("commit", "successor")

    answer = client.call("commit", "zombie", expect_ok=False)
    assert failed_with(answer, FENCED), answer
    # Fencing is fatal for the zombie: it cannot start another transaction either.
    again = client.call("begin", "zombie", expect_ok=False)
    assert not again["ok"], again

    assert wait_stable(bootstrap, topics) == {(topic, 0): 4, (topic, 1): 2}
    committed = read_all(bootstrap, topics, READ_COMMITTED)
    assert committed.values() == ["successor-0"]
    assert committed.offsets(topic, 0) == [2]
    everything = read_all(bootstrap, topics, READ_UNCOMMITTED)
    assert everything.values(topic, 0) == ["zombie-0", "successor-0"]
    assert everything.values(topic, 1) == ["zombie-1"]


def test_silent_transaction_is_aborted_after_its_timeout(
    txn_broker: tuple[BrokerProcess, int], bootstrap: str, client: JavaSession
) -> None:
    transaction_version = txn_broker[1]
    topic = "fencing-silent"
    topics = {topic: 1}
    create_topic(bootstrap, topic, 1)

    client.call("producer", "silent", "silent-id", "transaction.timeout.ms=3000")
    client.call("init", "silent")
    client.call("begin", "silent")
    assert client.call("send", "silent", topic, 0, "k", "silent-0")["offset"] == 0
    # Committed behind the silent transaction: held back from read_committed until the
    # coordinator has aborted the silent one.
    client.call("producer", "active", "active-id")
    client.call("init", "active")
    client.call("begin", "active")
    client.call("send", "active", topic, 0, "k", "active-0")
    client.call("commit", "active")

    # The silent producer never calls again; only the coordinator can end its transaction.
    wait_stable(bootstrap, topics)
    assert read_all(bootstrap, topics, READ_COMMITTED).values() == ["active-0"]
    assert read_all(bootstrap, topics, READ_UNCOMMITTED).values() == ["silent-0", "active-0"]

    # The timeout abort bumped the epoch: when the silent producer wakes up, its commit fails
    # and its record stays aborted.
    answer = client.call("commit", "silent", expect_ok=False)
    if transaction_version >= 2:
        assert failed_with(answer, "InvalidTxnStateException"), answer
    else:
        assert failed_with(answer, FENCED), answer
    wait_stable(bootstrap, topics)
    assert read_all(bootstrap, topics, READ_COMMITTED).values() == ["active-0"]


def test_transaction_version_2_bumps_the_epoch_at_every_end(
    txn_broker: tuple[BrokerProcess, int], bootstrap: str, client: JavaSession
) -> None:
    """Kafka's Java client speaks transaction version 2 when the broker finalized it (EndTxn v5,
    partitions added by their leaders): each commit and abort bumps the producer epoch; with the
    classic protocol the epoch stays. Either way the records end as they should."""
    transaction_version = txn_broker[1]
    topic = "fencing-epochs"
    topics = {topic: 2}
    create_topic(bootstrap, topic, 2)
    client.call("producer", "bumper", "bumper-id")
    client.call("init", "bumper")
    first = client.call("describe_txn", "bumper-id")
    for n, end in enumerate(("commit", "abort", "commit")):
        client.call("begin", "bumper")
        client.call("send", "bumper", topic, n % 2, "k", f"{end}-{n}")
        client.call(end, "bumper")
    last = client.call("describe_txn", "bumper-id")
    assert last["producer_id"] == first["producer_id"]
    assert last["producer_epoch"] - first["producer_epoch"] == (3 if transaction_version >= 2 else 0), (first, last)
    assert last["state"] == "CompleteCommit"
    wait_stable(bootstrap, topics)
    assert sorted(read_all(bootstrap, topics, READ_COMMITTED).values()) == ["commit-0", "commit-2"]
