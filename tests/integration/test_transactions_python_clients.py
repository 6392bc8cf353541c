"""Acceptance 2 of issue #16: the transactional APIs of confluent-kafka and kafka-python.

The same scenarios as the Java client's (test_transactions_java.py), run once per Python client:
commit and abort across several topics and partitions, an open transaction holding back
read_committed consumers, and a consume-transform-produce loop whose consumer group offsets
are committed in its transactions (``send_offsets_to_transaction``). What the transactions left
behind is read with librdkafka (``support/txn_checks.py``); the loop's input is read by the
client's own read_committed consumer.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import kafka
import kafka.structs
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, Producer, TopicPartition
from support.brokers import BrokerProcess
from support.clients import create_topic, wait_until
from support.txn_checks import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TXN_BROKER_SETTINGS,
    end_offsets,
    group_offsets,
    read_all,
    wait_end_offsets,
    wait_stable,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CALL_TIMEOUT = 60.0
LOOP_DEADLINE = 120.0


@pytest.fixture(scope="module")
def txn_broker(module_broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return module_broker_factory(TXN_BROKER_SETTINGS)


Outcomes = list[tuple[str, list[str]]]  # (commit|abort, the input values) per transaction


class TxnProducer(Protocol):
    def begin(self) -> None: ...
    def send(self, topic: str, partition: int, key: str, value: str) -> int: ...
    def commit(self) -> None: ...
    def abort(self) -> None: ...
    def close(self) -> None: ...
    def transform(self, group: str, source: str, sink: str, total: int, abort_every: int) -> Outcomes:
        """Consume-transform-produce until ``total`` input records are committed; every
        ``abort_every``-th transaction is aborted and its input processed again. Returns
        (outcome, input values) per transaction."""
        ...


def _abort_now(transactions: Outcomes, abort_every: int) -> bool:
    return (len(transactions) + 1) % abort_every == 0


def _transform_loop(consumer: Any, source: str, total: int, abort_every: int,
                    one_round: Callable[[bool], list[str] | None]) -> Outcomes:
    """Consume-transform-produce rounds with ``consumer`` subscribed to ``source`` until ``total``
    inputs are committed, then close it: ``one_round(abort)`` polls and, if it got records, runs
    one transaction over them (aborted when ``abort``) and returns their values; None when the
    poll got nothing."""
    transactions: Outcomes = []
    committed = 0
    deadline = time.monotonic() + LOOP_DEADLINE
    try:
        consumer.subscribe([source])
        while committed < total:
            assert time.monotonic() < deadline, f"committed {committed} of {total} inputs: {transactions}"
            abort = _abort_now(transactions, abort_every)
            inputs = one_round(abort)
            if inputs is None:
                continue
            transactions.append(("abort" if abort else "commit", inputs))
            if not abort:
                committed += len(inputs)
    finally:
        consumer.close()
    return transactions


class ConfluentTxn:
    def __init__(self, bootstrap: str, transactional_id: str) -> None:
        self.bootstrap = bootstrap
        self.producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                                  "linger.ms": 5, "log_level": 3})
        self.producer.init_transactions(CALL_TIMEOUT)

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send(self, topic: str, partition: int, key: str, value: str) -> int:
        delivered: list[Message] = []
        self.producer.produce(topic, value=value.encode(), key=key.encode(), partition=partition,
                              on_delivery=lambda err, msg: delivered.append(msg))
        assert self.producer.flush(CALL_TIMEOUT) == 0
        (msg,) = delivered
        if msg.error() is not None:
            raise KafkaException(msg.error())
        offset = msg.offset()
        assert offset is not None
        return offset

    def commit(self) -> None:
        self.producer.commit_transaction(CALL_TIMEOUT)

    def abort(self) -> None:
        self.producer.abort_transaction(CALL_TIMEOUT)

    def close(self) -> None:
        self.producer.flush(10)

    def transform(self, group: str, source: str, sink: str, total: int, abort_every: int) -> Outcomes:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group,
                             "isolation.level": READ_COMMITTED, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "log_level": 3})
        def one_round(abort: bool) -> list[str] | None:
            msgs = consumer.consume(num_messages=5, timeout=0.5)
            for msg in msgs:
                if msg.error() is not None:
                    raise KafkaException(msg.error())
            if not msgs:
                return None
            self.producer.begin_transaction()
            positions: dict[tuple[str, int], int] = {}
            inputs: list[str] = []
            for msg in msgs:
                topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
                assert topic is not None and partition is not None and offset is not None
                value = bytes(msg.value() or b"").decode()
                self.producer.produce(sink, value=f"t({value})".encode(), key=msg.key(), partition=partition)
                positions[(topic, partition)] = offset + 1
                inputs.append(value)
            self.producer.send_offsets_to_transaction(
                [TopicPartition(t, p, o) for (t, p), o in positions.items()],
                consumer.consumer_group_metadata(), CALL_TIMEOUT)
            # Aborting drops what is still buffered; flushing first puts every attempt in
            # the log, so read_uncommitted readers see the aborted ones too.
            assert self.producer.flush(CALL_TIMEOUT) == 0
            if abort:
                self.producer.abort_transaction(CALL_TIMEOUT)
                # Back to the group's committed offsets (the beginning where none).
                for tp in consumer.committed(consumer.assignment(), timeout=CALL_TIMEOUT):
                    consumer.seek(TopicPartition(tp.topic, tp.partition,
                                                 tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
            else:
                self.producer.commit_transaction(CALL_TIMEOUT)
            return inputs

        return _transform_loop(consumer, source, total, abort_every, one_round)


class KafkaPythonTxn:
    def __init__(self, bootstrap: str, transactional_id: str) -> None:
        self.bootstrap = bootstrap
        self.producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                                            linger_ms=5)
        self.producer.init_transactions()

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send(self, topic: str, partition: int, key: str, value: str) -> int:
        meta = self.producer.send(topic, value=value.encode(), key=key.encode(), partition=partition)
        return int(meta.get(timeout=CALL_TIMEOUT).offset)

    def commit(self) -> None:
        self.producer.commit_transaction()

    def abort(self) -> None:
        self.producer.abort_transaction()

    def close(self) -> None:
        self.producer.close(timeout=10)

    def transform(self, group: str, source: str, sink: str, total: int, abort_every: int) -> Outcomes:
        consumer = kafka.KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=group,
                                       isolation_level=READ_COMMITTED, enable_auto_commit=False,
                                       auto_offset_reset="earliest", max_poll_records=5)
        def one_round(abort: bool) -> list[str] | None:
            polled: dict[Any, list[Any]] = consumer.poll(timeout_ms=500)
            records = [r for batch in polled.values() for r in batch]
            if not records:
                return None
            self.producer.begin_transaction()
            positions: dict[Any, Any] = {}
            inputs: list[str] = []
            for tp, batch in polled.items():
                for r in batch:
                    value = bytes(r.value).decode()
                    self.producer.send(sink, value=f"t({value})".encode(), key=r.key, partition=r.partition)
                    inputs.append(value)
                positions[tp] = kafka.structs.OffsetAndMetadata(batch[-1].offset + 1, "", -1)
            self.producer.send_offsets_to_transaction(positions, consumer.group_metadata())
            self.producer.flush(timeout=CALL_TIMEOUT)  # see ConfluentTxn.transform
            if abort:
                self.producer.abort_transaction()
                for tp in consumer.assignment():
                    offset = consumer.committed(tp)
                    if offset is None:
                        consumer.seek_to_beginning(tp)
                    else:
                        consumer.seek(tp, offset)
            else:
                self.producer.commit_transaction()
            return inputs

        return _transform_loop(consumer, source, total, abort_every, one_round)


CLIENTS: dict[str, Callable[[str, str], TxnProducer]] = {
    "confluent": ConfluentTxn,
    "kafka-python": KafkaPythonTxn,
}


@pytest.fixture(params=sorted(CLIENTS))
def client_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_producer(txn_broker: BrokerProcess, client_name: str) -> Iterator[Callable[[str], TxnProducer]]:
    made: list[TxnProducer] = []

    def make(transactional_id: str) -> TxnProducer:
        producer = CLIENTS[client_name](txn_broker.bootstrap, f"{client_name}-{transactional_id}")
        made.append(producer)
        return producer

    yield make
    for producer in made:
        producer.close()


def test_commit_and_abort_across_topics_and_partitions(
    txn_broker: BrokerProcess, client_name: str, make_producer: Callable[[str], TxnProducer]
) -> None:
    bootstrap = txn_broker.bootstrap
    topics = {f"{client_name}-txn-orders": 3, f"{client_name}-txn-audit": 2}
    for topic, count in topics.items():
        create_topic(bootstrap, topic, count)
    partitions = [(t, p) for t, n in topics.items() for p in range(n)]

    producer = make_producer("multi")
    for txn, outcome in (("c1", "commit"), ("a2", "abort"), ("c3", "commit")):
        producer.begin()
        for topic, p in partitions:
            producer.send(topic, p, f"k{p}", f"{txn}-{topic}-{p}")
        producer.commit() if outcome == "commit" else producer.abort()

    # One record and one marker per partition and transaction: data at 0, 2, 4, end at 6.
    assert wait_stable(bootstrap, topics) == {tp: 6 for tp in partitions}
    committed = read_all(bootstrap, topics, READ_COMMITTED)
    uncommitted = read_all(bootstrap, topics, READ_UNCOMMITTED)
    for topic, p in partitions:
        assert committed.values(topic, p) == [f"c1-{topic}-{p}", f"c3-{topic}-{p}"]
        assert committed.offsets(topic, p) == [0, 4]
        assert uncommitted.values(topic, p) == [f"c1-{topic}-{p}", f"a2-{topic}-{p}", f"c3-{topic}-{p}"]
        assert uncommitted.offsets(topic, p) == [0, 2, 4]
    assert committed.ends == {tp: 6 for tp in partitions}


def test_read_committed_stops_at_an_open_transaction(
    txn_broker: BrokerProcess, client_name: str, make_producer: Callable[[str], TxnProducer]
) -> None:
    bootstrap = txn_broker.bootstrap
    topic = f"{client_name}-txn-open"
    topics = {topic: 2}
    create_topic(bootstrap, topic, 2)

    opened = make_producer("open")
    opened.begin()
    assert opened.send(topic, 0, "k", "open-1") == 0
    later = make_producer("later")
    later.begin()
    assert later.send(topic, 0, "k", "later-0") == 1
    assert later.send(topic, 1, "k", "later-1") == 0
    later.commit()
    wait_end_offsets(bootstrap, topics, {(topic, 0): 3, (topic, 1): 2})

    # Partition 0's last stable offset stays at the open transaction's first record; the
    # committed record behind it is held back too. Partition 1 reads to its end.
    assert end_offsets(bootstrap, topics, READ_COMMITTED) == {(topic, 0): 0, (topic, 1): 2}
    blocked = read_all(bootstrap, topics, READ_COMMITTED)
    assert blocked.values(topic, 0) == []
    assert blocked.values(topic, 1) == ["later-1"]
    assert blocked.ends == {(topic, 0): 0, (topic, 1): 2}
    assert read_all(bootstrap, topics, READ_UNCOMMITTED).values(topic, 0) == ["open-1", "later-0"]

    opened.commit()
    assert wait_stable(bootstrap, topics) == {(topic, 0): 4, (topic, 1): 2}
    assert read_all(bootstrap, topics, READ_COMMITTED).values(topic, 0) == ["open-1", "later-0"]


def test_consume_transform_produce_commits_offsets_in_the_transaction(
    txn_broker: BrokerProcess, client_name: str, make_producer: Callable[[str], TxnProducer]
) -> None:
    bootstrap = txn_broker.bootstrap
    source, sink, group = f"{client_name}-ctp-in", f"{client_name}-ctp-out", f"{client_name}-ctp"
    create_topic(bootstrap, source, 3)
    create_topic(bootstrap, sink, 3)

    # Per partition: 4 committed, 1 aborted, 2 committed records; offsets 0-3 data, 4 marker,
    # 5 aborted, 6 marker, 7-8 data, 9 marker.
    feeder = make_producer("ctp-source")
    wanted: list[str] = []
    for txn, count, outcome in (("first", 4, "commit"), ("dropped", 1, "abort"), ("second", 2, "commit")):
        feeder.begin()
        for p in range(3):
            for i in range(count):
                feeder.send(source, p, f"k{p}", f"{txn}-{p}-{i}")
                if outcome == "commit":
                    wanted.append(f"{txn}-{p}-{i}")
        feeder.commit() if outcome == "commit" else feeder.abort()
    assert wait_stable(bootstrap, {source: 3}) == {(source, p): 10 for p in range(3)}

    transactions = make_producer("ctp-worker").transform(group, source, sink, len(wanted), 3)
    assert "abort" in [outcome for outcome, _ in transactions], transactions
    seen = [v for _, inputs in transactions for v in inputs]
    assert not [v for v in seen if v.startswith("dropped")], "the read_committed input consumer saw aborted input"

    wait_stable(bootstrap, {sink: 3})
    committed_out = read_all(bootstrap, {sink: 3}, READ_COMMITTED)
    assert Counter(committed_out.values()) == Counter(f"t({v})" for v in wanted)
    all_out = read_all(bootstrap, {sink: 3}, READ_UNCOMMITTED)
    assert Counter(all_out.values()) == Counter(f"t({v})" for v in seen)
    offsets_now = wait_until(lambda: group_offsets(bootstrap, group), timeout=60, message="stable group offsets")
    assert offsets_now == {(source, p): 9 for p in range(3)}
