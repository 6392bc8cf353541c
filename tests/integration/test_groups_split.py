"""Acceptance 1: three consumers of one group split a 6-partition topic, every record once.

For each of kafka-python, confluent-kafka (librdkafka) and aiokafka: three consumers of one
group subscribe to a 6-partition topic. They join one after another, each right after a batch of
records is produced, so the group rebalances while records are being processed; each consumer
commits synchronously after it has processed a record (manual commit). Then:

- the final assignment gives every partition to exactly one consumer (no overlap, no gap);
- every produced record was processed exactly once: commits after processing, and revocations
  that wait for the processing in hand, leave nothing to redeliver and nothing skipped;
- records produced once the group is stable are processed by their partition's owner;
- partitions changed hands after records in them had been processed and committed;
- the committed offsets equal the log end offsets.

Each client runs its own rebalance callbacks (kafka-python, librdkafka: inside poll; aiokafka: in
a background task, which is why its consumers hold a lock while processing and committing).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from support.brokers import BrokerProcess
from support.clients import create_topic, wait_until
from support.groups import GROUP_BROKER_SETTINGS, committed_offsets, produce_known

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PARTITIONS = 6
MEMBERS = 3
# Records per partition in each batch; one batch before each consumer joins and one at the end.
PER_BATCH = 20
# Generous: nothing here waits for a session to expire, and a loaded test machine must not get
# a member evicted in the middle of the scenario.
SESSION_TIMEOUT_MS = 30_000
HEARTBEAT_INTERVAL_MS = 500
WAIT = 90.0
# Processing takes a little time (it blocks, like real work), so that the group is still busy
# with a batch when the next consumer joins: rebalances then fall between records.
PROCESSING_SECONDS = 0.005


@dataclass
class Ledger:
    """What the consumers processed, and the partitions each holds according to its callbacks."""

    processed: list[tuple[str, int, int, str]] = field(default_factory=list)
    holdings: dict[str, set[int] | None] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, consumer: str, partition: int, offset: int, value: str) -> None:
        time.sleep(PROCESSING_SECONDS)
        with self.lock:
            self.processed.append((consumer, partition, offset, value))

    def assigned(self, consumer: str, partitions: set[int]) -> None:
        with self.lock:
            self.holdings[consumer] = set(partitions)

    def revoked(self, consumer: str, partitions: set[int]) -> None:
        with self.lock:
            self.holdings[consumer] = (self.holdings.get(consumer) or set()) - partitions

    def keys(self) -> set[tuple[int, int]]:
        with self.lock:
            return {(p, o) for _, p, o, _ in self.processed}

    def split(self) -> dict[str, set[int]] | None:
        """The holdings if they cover every partition exactly once with nobody left empty."""
        with self.lock:
            held = {c: set(ps or ()) for c, ps in self.holdings.items()}
        owned = sorted(p for ps in held.values() for p in ps)
        if len(held) == MEMBERS and owned == list(range(PARTITIONS)) and all(held.values()):
            return held
        return None


class GroupConsumer:
    """One consumer of the group, driven in a background thread until :meth:`stop`."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, ledger: Ledger) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.ledger = ledger
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def signal_stop(self) -> None:
        self._stop.set()

    def stop(self, timeout: float = 60.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self.name} did not stop within {timeout:.0f}s"

    def _main(self) -> None:
        try:
            self.run(self._stop)
        except BaseException as exc:  # reported by the test after stop()
            self.error = exc

    def run(self, stop: threading.Event) -> None:
        raise NotImplementedError


class ConfluentConsumer(GroupConsumer):
    def run(self, stop: threading.Event) -> None:
        from confluent_kafka import Consumer, KafkaError, KafkaException

        consumer = Consumer({
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "client.id": self.name,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            "log_level": 3,
        })
        name, ledger = self.name, self.ledger

        def on_assign(c: Any, partitions: list[Any]) -> None:
            ledger.assigned(name, {tp.partition for tp in partitions})
            c.assign(partitions)

        def on_revoke(c: Any, partitions: list[Any]) -> None:
            ledger.revoked(name, {tp.partition for tp in partitions})
            c.unassign()

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not stop.is_set():
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(err)
                partition, offset, value = msg.partition(), msg.offset(), msg.value()
                assert partition is not None and offset is not None and value is not None
                ledger.add(name, partition, offset, value.decode())
                consumer.commit(message=msg, asynchronous=False)
        finally:
            consumer.close()


class KafkaPythonConsumer(GroupConsumer):
    def run(self, stop: threading.Event) -> None:
        from kafka import KafkaConsumer
        from kafka.consumer.subscription_state import ConsumerRebalanceListener
        from kafka.structs import OffsetAndMetadata

        name, ledger = self.name, self.ledger

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                ledger.revoked(name, {tp.partition for tp in revoked})

            def on_partitions_assigned(self, assigned: Any) -> None:
                ledger.assigned(name, {tp.partition for tp in assigned})

        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=self.name,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            # Small batches: more commits, more chances for a rebalance to fall between them.
            max_poll_records=10,
        )
        consumer.subscribe([self.topic], listener=Listener())
        try:
            while not stop.is_set():
                batches = consumer.poll(timeout_ms=200)
                for tp, msgs in batches.items():
                    for m in msgs:
                        ledger.add(name, tp.partition, m.offset, m.value.decode())
                    # Rebalances run inside poll(), so nothing is revoked between processing
                    # and this commit.
                    consumer.commit({tp: OffsetAndMetadata(msgs[-1].offset + 1, "", -1)})
        finally:
            consumer.close()


class AioKafkaConsumer(GroupConsumer):
    def run(self, stop: threading.Event) -> None:
        asyncio.run(self._run(stop))

    async def _run(self, stop: threading.Event) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

        name, ledger = self.name, self.ledger
        # aiokafka rebalances in a background task, not inside getmany(). The lock makes a
        # revocation wait for the batch being processed and committed, and processing skips
        # partitions revoked while the batch was in hand (their next owner reads them).
        lock = asyncio.Lock()

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: Any) -> None:
                async with lock:
                    ledger.revoked(name, {tp.partition for tp in revoked})

            async def on_partitions_assigned(self, assigned: Any) -> None:
                ledger.assigned(name, {tp.partition for tp in assigned})

        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=self.name,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        )
        consumer.subscribe([self.topic], listener=Listener())
        await consumer.start()
        try:
            while not stop.is_set():
                batches = await consumer.getmany(timeout_ms=200, max_records=10)
                async with lock:
                    owned = consumer.assignment()
                    for tp, msgs in batches.items():
                        if tp not in owned or not msgs:
                            continue
                        for m in msgs:
                            ledger.add(name, tp.partition, m.offset, m.value.decode())
                        await consumer.commit({TopicPartition(tp.topic, tp.partition): msgs[-1].offset + 1})
        finally:
            await consumer.stop()


CLIENTS: dict[str, Callable[..., GroupConsumer]] = {
    "kafka-python": KafkaPythonConsumer,
    "confluent-kafka": ConfluentConsumer,
    "aiokafka": AioKafkaConsumer,
}


@pytest.fixture(scope="module")
def group_broker(module_broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    # One broker for the three clients; each uses its own topic and group.
    return module_broker_factory(GROUP_BROKER_SETTINGS)


@pytest.mark.parametrize("client", list(CLIENTS))
def test_three_consumers_split_partitions_and_process_each_record_once(
    group_broker: BrokerProcess, client: str
) -> None:
    broker = group_broker
    topic = group = f"split-{client}"
    create_topic(broker.bootstrap, topic, PARTITIONS)

    ledger = Ledger()
    consumers: list[GroupConsumer] = []
    expected: dict[tuple[int, int], str] = {}
    try:
        # Consumer i joins right after batch i is produced, so its join rebalances the group
        # while the others are processing; before the next one joins, everything so far must
        # have been processed. The first consumer processes batch 0 alone on every partition,
        # so whichever partitions the others end up with were handed over at a committed offset.
        for i in range(MEMBERS):
            expected.update(produce_known(broker.bootstrap, topic, PARTITIONS, PER_BATCH, f"batch{i}"))
            consumer = CLIENTS[client](f"{client}-{i}", broker.bootstrap, group, topic, ledger)
            consumer.start()
            consumers.append(consumer)
            wanted = set(expected)

            def caught_up(wanted: set[tuple[int, int]] = wanted) -> bool:
                # A consumer whose thread died shows up as the wait's last error, not a bare timeout.
                failed = [f"{c.name}: {c.error!r}" for c in consumers if c.error is not None]
                if failed:
                    raise AssertionError(f"consumer failed: {failed}")
                return ledger.keys() >= wanted

            wait_until(caught_up, timeout=WAIT,
                       message=f"{client}: the {len(wanted)} records produced so far processed")
            for c in consumers:
                assert c.error is None, f"{c.name} failed: {c.error!r}"

        split = wait_until(ledger.split, timeout=WAIT,
                           message=f"{client}: {MEMBERS} consumers holding disjoint partitions covering all")
        last = produce_known(broker.bootstrap, topic, PARTITIONS, PER_BATCH, "last")
        expected.update(last)
        wait_until(lambda: ledger.keys() >= set(expected), timeout=WAIT,
                   message=f"{client}: all {len(expected)} records processed")
        # Nothing joined or left since: the split seen before the last batch is still in force.
        assert ledger.split() == split, f"{client}: assignment changed after settling: {ledger.holdings}"
    finally:
        # Signal every consumer first so the last ones do not rebalance needlessly, then wait.
        for c in consumers:
            c.signal_stop()
        for c in consumers:
            c.stop()
    errors = {c.name: repr(c.error) for c in consumers if c.error is not None}
    assert not errors, f"{client}: consumers failed: {errors}"

    owner = {p: name for name, ps in split.items() for p in ps}
    counts = Counter((p, o) for _, p, o, _ in ledger.processed)
    duplicates = sorted(k for k, n in counts.items() if n > 1)
    assert not duplicates, f"{client}: records processed more than once: {duplicates[:20]}"
    assert set(counts) == set(expected), (
        f"{client}: missing {sorted(set(expected) - set(counts))[:20]}, "
        f"unexpected {sorted(set(counts) - set(expected))[:20]}"
    )
    for who, p, o, value in ledger.processed:
        assert value == expected[(p, o)], f"{client}: {p}@{o} read {value!r}, produced {expected[(p, o)]!r}"
        if (p, o) in last:
            assert who == owner[p], f"{client}: {p}@{o} processed by {who}, owner is {owner[p]}"
    # The split leaves the first consumer 2 of 6 partitions: at least 4 changed hands after it
    # had processed and committed records in them.
    handed_over = [p for p in range(PARTITIONS) if len({c for c, q, _, _ in ledger.processed if q == p}) > 1]
    assert len(handed_over) >= PARTITIONS - PARTITIONS // MEMBERS, f"{client}: handed over {handed_over}"

    ends = {p: (MEMBERS + 1) * PER_BATCH for p in range(PARTITIONS)}
    committed = wait_until(
        lambda: (c := committed_offsets(broker.bootstrap, group, topic, range(PARTITIONS))) == ends and c,
        timeout=30.0,
        message=f"{client}: committed offsets equal to log end offsets {ends}",
    )
    assert committed == ends
    broker.assert_alive()
