"""Transaction version 2's implicit AddPartitionsToTxn (``transactions/partition_adder.py``): which
coordinator is asked, how its answers reach the producer, and CONCURRENT_TRANSACTIONS retried
for a short while. The coordinator here is this broker's (the in-process path) or a broker that
cannot be reached; the wire path is covered by the Java and Streams tests on several brokers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import pytest
from riverlog.controller.image import MetadataImage
from riverlog.controller.records import Endpoint, PartitionRecord, RegisterBrokerRecord, TopicRecord
from riverlog.protocol.errors import ErrorCode
from riverlog.transactions.partition_adder import PartitionAdder
from riverlog.transactions.placement import TRANSACTION_STATE_TOPIC, partition_for

pytestmark = pytest.mark.unit

TID = "tx-1"
PARTITIONS = 3


def image(coordinator: int, *, with_topic: bool = True) -> MetadataImage:
    topic_id = uuid.uuid4()
    records: list[object] = [RegisterBrokerRecord(b, (Endpoint("PLAINTEXT", "127.0.0.1", 1),)) for b in (1, 2)]
    if with_topic:
        records.append(TopicRecord(TRANSACTION_STATE_TOPIC, topic_id))
        mine = partition_for(TID, PARTITIONS)
        records += [PartitionRecord(topic_id, p, (1, 2), (1, 2), coordinator if p == mine else 2)
                    for p in range(PARTITIONS)]
    return MetadataImage("c").apply(records)  # type: ignore[arg-type]


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
