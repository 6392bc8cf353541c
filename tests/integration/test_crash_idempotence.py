"""An idempotent producer keeps writing while the broker is SIGKILLed and restarted.

librdkafka's idempotent producer retries every unacknowledged batch with the same producer id
and sequence numbers after each reconnect. The broker must persist its producer state so that
after a crash it recognises a retried batch it already appended (and acknowledges it without
appending again) and accepts the continuation of each sequence. Result: every acknowledged
record is in the log exactly once, nothing is duplicated, and each key's records keep their
produce order.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter, defaultdict
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from support.brokers import BrokerProcess
from support.clients import consume_range, create_topic, latest_offsets, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

TOPIC = "idempotence"
PARTITIONS = 3
KEYS = 12
CRASHES = 3
ACKS_BETWEEN_CRASHES = 1500  # newly acknowledged records to wait for before each kill
MAX_RECORDS = 200_000  # hard bound on the produce loop


class Acks:
    """Delivery reports, written from the producer's poll() on the main thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ok: dict[int, tuple[int, int]] = {}  # value -> (partition, offset)
        self.failed: dict[int, str] = {}
        self.fatal: list[str] = []

    def callback(self, err: KafkaError | None, msg: Any) -> None:
        number = int(msg.value())
        with self.lock:
            if err is None:
                self.ok[number] = (msg.partition(), msg.offset())
            else:
                self.failed[number] = str(err)
                if err.fatal():
                    self.fatal.append(str(err))

    def count(self) -> int:
        with self.lock:
            return len(self.ok)

    def reached(self, target: int) -> bool:
        return self.count() >= target


def test_idempotent_producer_survives_broker_kills(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    acks = Acks()
    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": "crash-idempotence",
            "enable.idempotence": True,  # implies acks=all, bounded in-flight, infinite retries
            "message.timeout.ms": 60000,  # long enough to outlive each restart
            "linger.ms": 5,
            "batch.num.messages": 200,
            # Reconnect quickly once the broker is back; the default backoff grows to 10 s.
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 500,
            "error_cb": lambda err: errors.append(str(err)),
            "log_level": 3,
        }
    )

    # The chaos thread kills and restarts the broker each time another batch of acknowledgements
    # has arrived, while the main thread keeps producing through the outages.
    crash_log: list[str] = []
    chaos_error: list[BaseException] = []

    def chaos() -> None:
        try:
            for crash in range(CRASHES):
                # Count from the end of the previous restart, so every crash interrupts a
                # stream that the restarted broker was demonstrably acknowledging again.
                target = acks.count() + ACKS_BETWEEN_CRASHES
                wait_until(functools.partial(acks.reached, target), timeout=90, interval=0.05,
                           message=f"{target} acknowledged records before crash {crash + 1}")
                crash_log.append(f"kill #{crash + 1} at {acks.count()} acks")
                broker.kill()
                time.sleep(0.5)
                broker.start()
                crash_log.append(f"restart #{crash + 1} done at {acks.count()} acks")
        except BaseException as exc:  # reported on the main thread
            chaos_error.append(exc)

    chaos_thread = threading.Thread(target=chaos, name="chaos", daemon=True)
    chaos_thread.start()

    produced = 0
    keys_of: dict[int, int] = {}
    deadline = time.monotonic() + 150
    # Keep writing until the last restart is done plus a tail of records after it.
    tail_target: int | None = None
    while produced < MAX_RECORDS and time.monotonic() < deadline:
        if not chaos_thread.is_alive() and tail_target is None:
            tail_target = produced + 2000
        if tail_target is not None and produced >= tail_target:
            break
        for _ in range(20):
            key = produced % KEYS
            keys_of[produced] = key
            try:
                producer.produce(TOPIC, key=f"key-{key}".encode(), value=str(produced).encode(),
                                 on_delivery=acks.callback)
            except BufferError:
                producer.poll(0.1)
                continue
            produced += 1
        producer.poll(0)
        time.sleep(0.01)  # a steady stream rather than one burst, so crashes land mid-stream

    chaos_thread.join(timeout=120)
    assert not chaos_error, f"chaos thread failed: {chaos_error[0]!r}"
    assert not chaos_thread.is_alive(), "chaos thread still running"
    assert len(crash_log) == 2 * CRASHES, crash_log

    remaining = producer.flush(90)
    assert remaining == 0, f"{remaining} records still undelivered after flush"
    assert not acks.fatal, f"fatal idempotence errors: {acks.fatal}"
    # With retries unbounded and a 60 s message timeout, a broker that restarts within seconds
    # must end up acknowledging every record.
    assert not acks.failed, f"{len(acks.failed)} records failed, e.g. {list(acks.failed.items())[:5]}"
    assert len(acks.ok) == produced, (len(acks.ok), produced)

    ends = latest_offsets(broker.bootstrap, TOPIC, range(PARTITIONS))
    records = consume_range(broker.bootstrap, TOPIC, ends, timeout=90)

    counts = Counter(int(r.value or b"-1") for part in records.values() for r in part)
    duplicates = {v: c for v, c in counts.items() if c > 1}
    assert not duplicates, f"{len(duplicates)} values duplicated, e.g. {list(duplicates.items())[:10]}"
    unknown = set(counts) - set(range(produced))
    assert not unknown, f"values never produced: {sorted(unknown)[:10]}"
    missing = set(acks.ok) - set(counts)
    assert not missing, f"{len(missing)} acknowledged values missing, e.g. {sorted(missing)[:10]}"

    # Each acknowledgement named the record's real place in the log.
    located = {int(r.value or b"-1"): (r.partition, r.offset) for part in records.values() for r in part}
    wrong = {v: (where, located[v]) for v, where in acks.ok.items() if located[v] != where}
    assert not wrong, f"acknowledged offsets differ from the log, e.g. {list(wrong.items())[:5]}"

    # Per key (hence per partition), values appear in the order they were produced.
    by_key: dict[tuple[int, bytes | None], list[int]] = defaultdict(list)
    for p, part in records.items():
        offsets = [r.offset for r in part]
        assert offsets == list(range(ends[p])), f"partition {p}: offsets not contiguous from 0"
        for r in part:
            by_key[(p, r.key)].append(int(r.value or b"-1"))
    for (p, record_key), values in by_key.items():
        assert values == sorted(values), f"partition {p} key {record_key!r}: out of produce order"
        assert all(keys_of[v] == keys_of[values[0]] for v in values)
    broker.assert_alive()
    print(f"produced {produced} records; {'; '.join(crash_log)}")
