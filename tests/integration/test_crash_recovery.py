"""Heavy writes, a SIGKILL in the middle of them, and recovery of the log on restart.

After an unclean shutdown the broker must rebuild its view of each partition from the segment
files: truncate a torn tail, rebuild indexes, and serve every record it acknowledged at the
offset it acknowledged, with valid CRCs and no gaps. Small segments (1 MiB) make recovery cross
several segment boundaries.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from support.brokers import BrokerProcess
from support.clients import Record, consume_range, create_topic, earliest_offsets, latest_offsets, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

TOPIC = "recovery"
PARTITIONS = 3
SEGMENT_BYTES = 1024 * 1024  # Kafka 4.x's minimum for log.segment.bytes
VALUE_BYTES = 1024
KILL_AFTER_BYTES = 8 * 1024 * 1024  # acknowledged payload before the kill
RECORDS_PER_THREAD = 6000
# (acks, codec) per producer thread: several writers, different batch shapes.
WRITERS = (("all", "none"), ("1", "lz4"), ("all", "zstd"))


class Writer(threading.Thread):
    """A producer thread writing RECORDS_PER_THREAD unique records; never blocks forever."""

    def __init__(self, index: int, bootstrap: str, acks: str, codec: str, stop: threading.Event) -> None:
        super().__init__(name=f"writer-{index}", daemon=True)
        self.index = index
        self.stop_event = stop
        self.lock = threading.Lock()
        self.acked: dict[str, tuple[int, int, int]] = {}  # id -> (partition, offset, timestamp)
        self.failed: dict[str, str] = {}
        self.acked_bytes = 0
        self.produced = 0
        self.error: BaseException | None = None
        # Random payloads: compression must not shrink them, so segments really fill up.
        self.rng = random.Random(index)
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": f"recovery-writer-{index}",
                "acks": acks,
                "compression.type": codec,
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
                "log_level": 3,
            }
        )

    def _report(self, err: KafkaError | None, msg: Any) -> None:
        # Delivery reports carry no headers; the id is also the value's prefix.
        ident = msg.value().split(b"|", 1)[0].decode()
        with self.lock:
            if err is None:
                self.acked[ident] = (msg.partition(), msg.offset(), msg.timestamp()[1])
                self.acked_bytes += len(msg.value())
            else:
                self.failed[ident] = str(err)

    def run(self) -> None:
        try:
            for n in range(RECORDS_PER_THREAD):
                if self.stop_event.is_set():
                    break
                ident = f"w{self.index}-{n}"
                value = ident.encode() + b"|" + self.rng.randbytes(VALUE_BYTES)
                while True:
                    try:
                        self.producer.produce(
                            TOPIC, key=f"k{n % 16}".encode(), value=value, headers=[("id", ident.encode())],
                            on_delivery=self._report,
                        )
                        break
                    except BufferError:  # local queue full while the broker is down
                        self.producer.poll(0.1)
                        if self.stop_event.is_set():
                            return
                self.produced += 1
                self.producer.poll(0)
            self.producer.flush(90)
        except BaseException as exc:  # re-raised on the main thread
            self.error = exc

    def acked_total(self) -> int:
        with self.lock:
            return self.acked_bytes


def first_offset_at_or_after(records: list[Record], ts: int) -> int:
    """ListOffsets by timestamp: the lowest offset whose timestamp >= ts, -1 when none."""
    offsets = [r.offset for r in records if r.timestamp >= ts]
    return min(offsets) if offsets else -1


def test_kill_during_heavy_writes_then_recover(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory(overrides={"log.segment.bytes": SEGMENT_BYTES})
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)

    stop = threading.Event()
    writers = [Writer(i, broker.bootstrap, acks, codec, stop) for i, (acks, codec) in enumerate(WRITERS)]
    for w in writers:
        w.start()
    try:
        def enough_acked() -> bool:
            for w in writers:
                assert w.error is None, f"{w.name} failed: {w.error!r}"
            return sum(w.acked_total() for w in writers) >= KILL_AFTER_BYTES

        wait_until(enough_acked, timeout=120, interval=0.02,
                   message=f"{KILL_AFTER_BYTES} acknowledged bytes before the kill")
        assert any(w.is_alive() for w in writers), "writers finished before the kill; raise RECORDS_PER_THREAD"
        acked_at_kill = sum(len(w.acked) for w in writers)
        broker.kill()
        time.sleep(1.0)  # writers keep queueing and retrying against a dead port
        broker.start()
        for w in writers:
            w.join(timeout=150)
    finally:
        stop.set()
    for w in writers:
        assert not w.is_alive(), f"{w.name} did not finish"
        assert w.error is None, f"{w.name} failed: {w.error!r}"
    acked = {ident: where for w in writers for ident, where in w.acked.items()}
    assert len(acked) > acked_at_kill, "nothing was acknowledged after the restart"

    # Read everything back with CRC checks on every batch.
    assert earliest_offsets(broker.bootstrap, TOPIC, range(PARTITIONS)) == dict.fromkeys(range(PARTITIONS), 0)
    ends = latest_offsets(broker.bootstrap, TOPIC, range(PARTITIONS))
    records = consume_range(broker.bootstrap, TOPIC, ends, timeout=120, conf={"check.crcs": True})

    located: dict[str, tuple[int, int, int]] = {}
    for p, part in records.items():
        offsets = [r.offset for r in part]
        assert offsets == list(range(ends[p])), (
            f"partition {p}: offsets not contiguous 0..{ends[p] - 1} (got {len(offsets)} records)"
        )
        for r in part:
            ident = dict(r.headers)["id"]
            assert ident is not None and r.value is not None and r.value.startswith(ident + b"|"), r
            # A retried (non-idempotent) batch may legitimately appear twice; keep the first.
            located.setdefault(ident.decode(), (r.partition, r.offset, r.timestamp))
    missing = [i for i in acked if i not in located]
    assert not missing, f"{len(missing)} acknowledged records missing after recovery, e.g. {missing[:5]}"
    moved = {i: (acked[i], located[i]) for i in acked if acked[i][:2] != located[i][:2]}
    # The first copy of an acknowledged record is at the acknowledged offset, unless an earlier
    # retry copy exists; either way the acknowledged offset must hold that same record.
    by_position = {(r.partition, r.offset): r for part in records.values() for r in part}
    for name, ((p, o, _), _) in moved.items():
        holder = by_position.get((p, o))
        assert holder is not None and dict(holder.headers)["id"] == name.encode(), (
            f"{name} acknowledged at {p}/{o}, which now holds {holder}"
        )

    # Offsets by timestamp after recovery (the time indexes were rebuilt or reloaded).
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "riverlog-tests-unused",
                         "enable.auto.commit": False, "log_level": 3})
    try:
        for p, part in records.items():
            assert part, f"partition {p} is empty"
            timestamps = sorted({r.timestamp for r in part})
            picks = {timestamps[0] - 1, timestamps[-1] + 1}
            picks.update(timestamps[int(len(timestamps) * q)] for q in (0.1, 0.35, 0.6, 0.85))
            picks.update(t + 1 for t in list(picks))
            for ts in sorted(picks):
                (answer,) = consumer.offsets_for_times([TopicPartition(TOPIC, p, ts)], timeout=30)
                assert answer.error is None, answer
                expected = first_offset_at_or_after(part, ts)
                assert answer.offset == expected, f"partition {p} timestamp {ts}: {answer.offset} != {expected}"
    finally:
        consumer.close()

    # Kafka's on-disk layout: every segment has its offset index and time index.
    segments = check_segment_files(broker.data_dir, TOPIC, PARTITIONS)
    broker.assert_alive()
    failed = sum(len(w.failed) for w in writers)
    print(f"acked {len(acked)} records ({acked_at_kill} before the kill), {failed} failed, "
          f"log ends {ends}, {segments} segments")


def check_segment_files(data_dir: Path, topic: str, partitions: int) -> int:
    total_segments = 0
    for p in range(partitions):
        pdir = data_dir / f"{topic}-{p}"
        assert pdir.is_dir(), f"missing partition directory {pdir}: {sorted(os.listdir(data_dir))}"
        names = set(os.listdir(pdir))
        logs = sorted(n for n in names if n.endswith(".log"))
        assert logs, f"{pdir} has no segments: {sorted(names)}"
        for log in logs:
            base = log.removesuffix(".log")
            assert len(base) == 20 and base.isdigit(), f"segment name {log} is not a 20-digit offset"
            for suffix in (".index", ".timeindex"):
                assert base + suffix in names, f"{pdir}: {log} has no {base}{suffix}: {sorted(names)}"
        total_segments += len(logs)
    # ~24 MiB over 3 partitions in 1 MiB segments: several segments each.
    assert total_segments >= 2 * partitions, f"only {total_segments} segments; log.segment.bytes ignored?"
    return total_segments
