"""Transaction version 2's implicit AddPartitionsToTxn (``transactions/partition_adder.py``): which
coordinator is asked, how its answers reach the producer, and CONCURRENT_TRANSACTIONS retried
for a short while; and the partition leader's verification guard (KIP-890), which a marker
for the producer ends. The coordinator here is this broker's (the in-process path) or a broker that
cannot be reached; the wire path is covered by the Java and Streams tests on several brokers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from riverlog.cluster.partition import Partition
from riverlog.controller.image import MetadataImage
from riverlog.controller.records import Endpoint, PartitionRecord, Record, RegisterBrokerRecord, TopicRecord
from riverlog.protocol.errors import ErrorCode
from riverlog.protocol.record_batch import NewRecord, build_batch
from riverlog.storage import Log, LogConfig
from riverlog.transactions.partition_adder import PartitionAdder
from riverlog.transactions.placement import TRANSACTION_STATE_TOPIC, partition_for

pytestmark = pytest.mark.unit

TID = "tx-1"
PARTITIONS = 3


def image(coordinator: int, *, with_topic: bool = True) -> MetadataImage:
    topic_id = uuid.uuid4()
    records: list[Record] = [RegisterBrokerRecord(b, (Endpoint("PLAINTEXT", "127.0.0.1", 1),)) for b in (1, 2)]
    if with_topic:
        records.append(TopicRecord(TRANSACTION_STATE_TOPIC, topic_id))
        mine = partition_for(TID, PARTITIONS)
        records += [PartitionRecord(topic_id, p, (1, 2), (1, 2), coordinator if p == mine else 2)
                    for p in range(PARTITIONS)]
    return MetadataImage("c").apply(records)


class Coordinator:
    """This broker's coordinator: answers from a script, records what it was asked."""

    def __init__(self, *answers: ErrorCode) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, int, int, list[tuple[str, int]]]] = []

    async def __call__(self, tid: str, pid: int, epoch: int, partitions: Sequence[tuple[str, int]]) -> ErrorCode:
        self.calls.append((tid, pid, epoch, list(partitions)))
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def add(adder: PartitionAdder, **kwargs: float) -> ErrorCode:
    return asyncio.run(adder.add(TID, 7, 3, [("t", 0), ("t", 1)], **kwargs))


def test_the_local_coordinator_is_called_in_process() -> None:
    local = Coordinator(ErrorCode.NONE)
    adder = PartitionAdder(1, lambda: image(coordinator=1), "PLAINTEXT", local)
    assert add(adder) == ErrorCode.NONE
    assert local.calls == [(TID, 7, 3, [("t", 0), ("t", 1)])]


def test_concurrent_transactions_is_retried_then_passed_on() -> None:
    local = Coordinator(ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NONE)
    adder = PartitionAdder(1, lambda: image(coordinator=1), "PLAINTEXT", local)
    assert add(adder) == ErrorCode.NONE and len(local.calls) == 3
    stuck = Coordinator(ErrorCode.CONCURRENT_TRANSACTIONS)
    adder = PartitionAdder(1, lambda: image(coordinator=1), "PLAINTEXT", stuck)
    assert add(adder, retry_window_s=0.05) == ErrorCode.CONCURRENT_TRANSACTIONS and len(stuck.calls) >= 2


def test_a_fenced_producer_is_told_invalid_producer_epoch() -> None:
    adder = PartitionAdder(1, lambda: image(coordinator=1), "PLAINTEXT", Coordinator(ErrorCode.PRODUCER_FENCED))
    assert add(adder) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_no_coordinator_is_coordinator_not_available() -> None:
    local = Coordinator(ErrorCode.NONE)
    assert add(PartitionAdder(1, lambda: image(1, with_topic=False), "PLAINTEXT", local)) == \
        ErrorCode.COORDINATOR_NOT_AVAILABLE
    # Broker 2 leads the id's partition but nothing listens at its address.
    assert add(PartitionAdder(1, lambda: image(coordinator=2), "PLAINTEXT", local, request_timeout_s=2)) == \
        ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert local.calls == []


# The leader's verification guard (Partition.start_txn_verification) ---------------------------


@pytest.fixture
def partition(tmp_path: Path) -> Iterator[Partition]:
    log = Log.open(tmp_path / "t-0", LogConfig(), now_ms=0)
    part = Partition("t", 0, uuid.uuid4(), log, 1)
    part.become_leader(1, (1,), (1,))
    yield part
    log.close()


def test_a_marker_for_the_producer_ends_its_verification(partition: Partition) -> None:
    guard = partition.start_txn_verification(7, 0, False)
    assert partition.txn_verification_holds(7, guard)
    partition.append_txn_marker(8, 0, 0, False, now_ms=0)  # another producer's marker
    assert partition.txn_verification_holds(7, guard)
    partition.append_txn_marker(7, 0, 0, False, now_ms=0)  # the transaction ended meanwhile
    assert not partition.txn_verification_holds(7, guard)
    # A newer verification replaces an older one.
    first = partition.start_txn_verification(7, 0, False)
    second = partition.start_txn_verification(7, 0, False)
    assert not partition.txn_verification_holds(7, first) and partition.txn_verification_holds(7, second)


def test_a_version_2_verification_outlives_the_last_transactions_marker(partition: Partition) -> None:
    # The next transaction runs at the epoch the last one's markers carry (1): that marker,
    # arriving after the next transaction's first batch was sent, must not end it.
    guard = partition.start_txn_verification(7, 1, True)
    partition.append_txn_marker(7, 1, 0, True, now_ms=0)
    assert partition.txn_verification_holds(7, guard)
    partition.append_txn_marker(7, 2, 0, False, now_ms=0)  # its own end (or a timeout abort)
    assert not partition.txn_verification_holds(7, guard)


def test_losing_leadership_drops_verifications(partition: Partition) -> None:
    guard = partition.start_txn_verification(7, 0, False)
    partition.become_follower(2, 2, 1, (1, 2), (1, 2))
    assert not partition.txn_verification_holds(7, guard)


def test_has_open_transaction_needs_the_same_producer_and_epoch(partition: Partition) -> None:
    batch = build_batch([NewRecord(b"v", b"k", [], 0)], producer_id=7, producer_epoch=1, base_sequence=0,
                        transactional=True)
    partition.append(memoryview(batch), acks=1, now_ms=0)
    assert partition.has_open_transaction(7, 1)
    assert not partition.has_open_transaction(7, 2) and not partition.has_open_transaction(8, 1)
    partition.append_txn_marker(7, 1, 0, True, now_ms=0)
    assert not partition.has_open_transaction(7, 1)
