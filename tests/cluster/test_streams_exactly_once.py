"""Acceptance 3 of issue #16: Kafka Streams with ``processing.guarantee=exactly_once_v2``.

A stateful topology (``tests/java/StreamsEosApp.java``: orders repartitioned by order id, a
windowed stream-stream join with payments, the joined records repartitioned by user and counted
in tumbling windows with a changelogged window store) runs as two Streams instances, two JVMs,
over a 3-broker cluster while the input is produced. Mid-run one instance is killed with -9 and
restarted from its state directory; later the broker that coordinates the other instance's
transactions (the leader of its ``__transaction_state`` partition) is killed with -9 while that
instance is in the middle of them, and restarted. The output topic, read with ``read_committed``, must then equal
what :func:`expected_output` computes from the input in Python: as a multiset, exactly. With
caching off every joined record makes exactly one count update (1, 2, ..., n per user and
window), so a record processed twice, lost, or read from an aborted transaction shows up as a
count too many, a count missing, or a count repeated.

The input is generated from a fixed seed (record timestamps are relative to the test's start,
an hour back, so that no retention deletes them). Runs against Riverlog and, with
``RIVERLOG_TEST_TARGET=kafka``, against Apache Kafka with the same code.
"""

from __future__ import annotations

import contextlib
import json
import queue
import random
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest
from confluent_kafka import Producer
from support.cluster_workload import create_topic
from support.java_programs import JavaPrograms
from support.process_cluster import ProcessCluster
from support.txn_checks import READ_COMMITTED, READ_UNCOMMITTED, read_all, wait_stable

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]

SEED = 16
APP_ID = "riverlog-streams-eos"
ORDERS, PAYMENTS, OUTPUT = "eos-orders", "eos-payments", "eos-paid-per-user"
PARTITIONS = 3
USERS = [f"u{n:02d}" for n in range(10)]
ORDER_COUNT = 1500
ORDER_SPACING_MS = 40  # 1500 orders over 60 s of event time: 6 ten-second windows per user
JOIN_WINDOW_MS = 5_000  # JoinWindows.ofTimeDifference(5 s) in StreamsEosApp
COUNT_WINDOW_MS = 10_000  # TimeWindows.ofSize(10 s)
BATCH = 60  # records produced per step; one step every BATCH_PAUSE seconds
BATCH_PAUSE = 0.4
# Waiting for the output ends when it has not grown for this long.
STALL = 45.0

CLUSTER_SETTINGS: dict[str, object] = {
    # Zombie transactions (the killed instance's) are aborted soon after their timeout (Streams
    # uses 10 s for exactly_once_v2) instead of up to 10 s later.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 2000,
}


@dataclass(frozen=True)
class Rec:
    topic: str
    key: str
    value: str
    timestamp: int


def generate(seed: int, base_ms: int) -> list[Rec]:
    """Orders (key user, value "orderId,amount") and payments (key orderId, value paymentId) in
    the order they are produced. Most orders get one payment within the join window, some a
    payment outside it (no join), some two payments (two joined records), some none; a few
    payments have no order."""
    rng = random.Random(seed)
    orders: list[Rec] = []
    payments: list[tuple[int, Rec]] = []  # (produce slot, record)
    for i in range(ORDER_COUNT):
        order_id = f"o{i:05d}"
        ts = base_ms + i * ORDER_SPACING_MS + rng.randrange(ORDER_SPACING_MS)
        orders.append(Rec(ORDERS, rng.choice(USERS), f"{order_id},{rng.randrange(1, 500)}", ts))
        roll = rng.random()
        count = 0 if roll < 0.1 else 2 if roll > 0.93 else 1
        for n in range(count):
            # Mostly within +-5 s, sometimes just outside it: those never join.
            if rng.random() < 0.85:
                delta = rng.randrange(-4_000, 4_000)
            else:
                delta = rng.choice((-1, 1)) * rng.randrange(5_200, 9_000)
            payments.append((i + rng.randrange(0, 40), Rec(PAYMENTS, order_id, f"p{i:05d}-{n}", ts + delta)))
    for n in range(60):
        i = rng.randrange(ORDER_COUNT)
        payments.append((i, Rec(PAYMENTS, f"x{n:05d}", f"px{n:05d}", base_ms + i * ORDER_SPACING_MS)))
    slots: list[tuple[int, int, Rec]] = [(i, 0, rec) for i, rec in enumerate(orders)]
    slots += [(slot, 1, rec) for slot, rec in payments]
    slots.sort(key=lambda item: (item[0], item[1]))
    return [rec for _, _, rec in slots]


def expected_output(records: list[Rec]) -> Counter[tuple[str, str]]:
    """The topology computed in Python: the inner join of orders and payments on the order id
    within +-5 s (its timestamp the later of the two), counted per user in 10 s windows; each
    window of n joined records emits the counts 1..n under the key "user@windowStart"."""
    orders: dict[str, list[tuple[str, int]]] = {}
    for rec in records:
        if rec.topic == ORDERS:
            order_id = rec.value.split(",")[0]
            orders.setdefault(order_id, []).append((rec.key, rec.timestamp))
    per_window: Counter[str] = Counter()
    for rec in records:
        if rec.topic != PAYMENTS:
            continue
        for user, order_ts in orders.get(rec.key, []):
            if abs(order_ts - rec.timestamp) <= JOIN_WINDOW_MS:
                joined_ts = max(order_ts, rec.timestamp)
                per_window[f"{user}@{joined_ts - joined_ts % COUNT_WINDOW_MS}"] += 1
    return Counter((key, str(c)) for key, n in per_window.items() for c in range(1, n + 1))


def partition_for(key: str, partitions: int = 3) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % partitions``: where a group id or transactional id
    lives in ``__consumer_offsets`` or ``__transaction_state`` (3 partitions in CLUSTER_DEFAULTS)."""
    h = 0
    for ch in key:  # ids here are ASCII: one UTF-16 unit per character, as Java hashes them
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    signed = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions


class StreamsInstance:
    """One StreamsEosApp JVM; its JSON lines (state changes, replaced threads) are collected."""

    def __init__(self, programs: JavaPrograms, name: str, bootstrap: str, workdir: Path) -> None:
        self.programs = programs
        self.name = name
        self.bootstrap = bootstrap
        self.state_dir = workdir / f"state-{name}"
        self.log_path = workdir / f"streams-{name}.log"
        self.proc: subprocess.Popen[str] | None = None
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.history: list[dict[str, Any]] = []
        self.starts = 0

    def start(self) -> StreamsInstance:
        cmd = self.programs.command("StreamsEosApp", [
            self.bootstrap, APP_ID, str(self.state_dir), ORDERS, PAYMENTS, OUTPUT])
        # Streams' own INFO lines (rebalances, task migrations, EOS recoveries) are what one reads
        # when this test fails.
        cmd.insert(cmd.index("-cp"), "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.streams=info")
        self.starts += 1
        log: IO[bytes]
        with open(self.log_path, "ab") as log:
            log.write(f"=== start {self.starts} ===\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         text=True, bufsize=1)
        threading.Thread(target=self._read, args=(self.proc, self.starts), daemon=True).start()
        return self

    def _read(self, proc: subprocess.Popen[str], start: int) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                event["start"] = start
                self.history.append(event)
                self.events.put(event)

    def wait_state(self, state: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"Streams instance {self.name} not {state} within {timeout:.0f}s; "
                                     f"events {self.history}\n{self.log_tail()}")
            try:
                event = self.events.get(timeout=min(remaining, 1.0))
            except queue.Empty:
                if self.proc is not None and self.proc.poll() is not None:
                    raise AssertionError(f"Streams instance {self.name} exited ({self.proc.returncode})\n"
                                         f"{self.log_tail()}") from None
                continue
            if event.get("state") == state:
                return

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        while not self.events.empty():
            self.events.get_nowait()

    def close(self, timeout: float = 90.0) -> int | None:
        """A clean close (commits what it processed); SIGKILL if it does not end in time."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                assert self.proc.stdin is not None
                self.proc.stdin.write("close\n")
                self.proc.stdin.flush()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        return self.proc.returncode

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return f"--- last {min(lines, len(text))} lines of {self.log_path} ---\n" + "\n".join(text[-lines:])

    def transactional_id(self) -> str:
        """exactly_once_v2's transactional.id of this instance's only stream thread: the
        application id, the process id Streams keeps in its state directory, the thread's index."""
        metadata = json.loads((self.state_dir / APP_ID / "kafka-streams-process-metadata").read_text())
        return f"{APP_ID}-{metadata['processId']}-1"

    def thread_errors(self) -> list[dict[str, Any]]:
        return [e for e in self.history if "thread_error" in e]


@pytest.fixture
def streams_instances(kafka_libs: Path, tmp_path: Path) -> Iterator[Callable[[str, str], StreamsInstance]]:
    programs = JavaPrograms(kafka_libs, heap="256m")
    programs.classes()
    made: list[StreamsInstance] = []

    def make(name: str, bootstrap: str) -> StreamsInstance:
        instance = StreamsInstance(programs, name, bootstrap, tmp_path)
        made.append(instance)
        return instance

    yield make
    for instance in made:
        instance.kill()


def produce(producer: Producer, records: list[Rec], errors: list[str]) -> None:
    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    for rec in records:
        while True:
            try:
                producer.produce(rec.topic, key=rec.key, value=rec.value, timestamp=rec.timestamp,
                                 on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)


def leader_of(cluster: ProcessCluster, topic: str, partition: int) -> int:
    return cluster.wait_until(lambda: cluster.partition_state(topic, partition).leader,
                              timeout=60, what=f"a leader of {topic}-{partition}")


def test_streams_exactly_once_v2_survives_instance_and_broker_kills(
    process_cluster_factory: Callable[..., ProcessCluster],
    streams_instances: Callable[[str, str], StreamsInstance],
    record_property: Callable[[str, object], None],
) -> None:
    cluster = process_cluster_factory(3, overrides=CLUSTER_SETTINGS, netns=False)
    for topic in (ORDERS, PAYMENTS, OUTPUT):
        create_topic(cluster, topic, partitions=PARTITIONS, replication=3)
    base_ms = (int(time.time() * 1000) // 60_000) * 60_000 - 3_600_000
    records = generate(SEED, base_ms)
    expected = expected_output(records)

    first = streams_instances("a", cluster.bootstrap).start()
    second = streams_instances("b", cluster.bootstrap).start()
    first.wait_state("RUNNING", 120)
    second.wait_state("RUNNING", 120)

    producer = Producer({
        "bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
        # log_level 2: not the connection errors expected while a broker is down.
        "linger.ms": 5, "log_level": 2, "message.timeout.ms": 120_000,
        # Java's partitioner (murmur2): payments must sit in the partition Streams' repartitioned
        # orders with the same key go to, or the co-partitioned join misses them.
        "partitioner": "murmur2_random",
    })
    errors: list[str] = []
    batches = [records[i:i + BATCH] for i in range(0, len(records), BATCH)]
    kill_instance_at, kill_broker_at, restart_broker_at = len(batches) // 4, len(batches) // 2, 3 * len(batches) // 4
    victim = -1
    timeline: list[str] = []
    started = time.monotonic()
    for step, batch in enumerate(batches):
        if step == kill_instance_at:
            first.kill()
            timeline.append(f"{time.monotonic() - started:.1f}s: Streams instance a killed (-9) and restarted")
            first.start()
        if step == kill_broker_at:
            # The transaction coordinator of the instance that was not killed, in the middle of
            # its transactions; say whether it coordinates the group too.
            victim = leader_of(cluster, "__transaction_state", partition_for(second.transactional_id()))
            roles = "transaction coordinator of instance b"
            if victim == leader_of(cluster, "__consumer_offsets", partition_for(APP_ID)):
                roles += " and group coordinator"
            cluster.node(victim).kill()
            timeline.append(f"{time.monotonic() - started:.1f}s: broker {victim} ({roles}) killed (-9)")
        if step == restart_broker_at:
            cluster.node(victim).launch()
            timeline.append(f"{time.monotonic() - started:.1f}s: broker {victim} restarting")
        produce(producer, batch, errors)
        time.sleep(BATCH_PAUSE)
    remaining = producer.flush(120)
    assert remaining == 0 and not errors, f"input not fully produced: {remaining} pending, errors {errors[:5]}"
    timeline.append(f"{time.monotonic() - started:.1f}s: all {len(records)} input records produced")
    cluster.node(victim).wait_ready()

    total = sum(expected.values())

    def output() -> Counter[tuple[str, str]]:
        read = read_all(cluster.bootstrap, {OUTPUT: PARTITIONS}, READ_COMMITTED, timeout=60)
        return Counter((str(r.key), str(r.value)) for r in read.records)

    # Wait until the committed output has all the records expected, or has stopped growing for
    # STALL seconds (then the comparison below says what is missing).
    progress: dict[str, float] = {"count": -1, "since": time.monotonic()}

    def caught_up() -> bool:
        for instance in (first, second):
            assert instance.proc is not None and instance.proc.poll() is None, (
                f"Streams instance {instance.name} exited ({instance.proc and instance.proc.returncode})\n"
                + instance.log_tail())
        count = sum(output().values())
        if count != progress["count"]:
            progress.update(count=count, since=time.monotonic())
        return count >= total or time.monotonic() - progress["since"] > STALL

    cluster.wait_until(caught_up, timeout=240, interval=2.0, what=f"{total} committed output records")
    timeline.append(f"{time.monotonic() - started:.1f}s: {progress['count']} committed output records; closing Streams")
    closed = {instance.name: instance.close() for instance in (first, second)}

    actual = output()
    # What read_uncommitted sees besides: records of aborted transactions (the killed instance's
    # open one, fenced or timed out) are in the log, and read_committed must have skipped them.
    uncommitted = read_all(cluster.bootstrap, {OUTPUT: PARTITIONS}, READ_UNCOMMITTED, timeout=60)
    aborted_in_log = len(uncommitted.records) - sum(actual.values())
    inputs = read_all(cluster.bootstrap, {ORDERS: PARTITIONS, PAYMENTS: PARTITIONS}, READ_COMMITTED, timeout=60)
    produced = Counter((r.topic, r.key, r.value) for r in inputs.records)
    thread_errors = [(i.name, e) for i in (first, second) for e in i.thread_errors()]
    print("\n".join(timeline))
    print(f"output: {sum(actual.values())} records, expected {total}; {aborted_in_log} more read_uncommitted; "
          f"closed {closed}; replaced threads {thread_errors}")
    record_property("timeline", timeline)
    record_property("replaced_stream_threads", len(thread_errors))
    record_property("aborted_output_records", aborted_in_log)

    assert produced == Counter((r.topic, r.key, r.value) for r in records), "the input topics differ from the input"
    if actual != expected:
        missing, extra = expected - actual, actual - expected
        raise AssertionError(
            f"output differs from the independent computation: {sum(actual.values())} records, expected {total}; "
            f"{sum(missing.values())} missing (e.g. {sorted(missing)[:10]}), "
            f"{sum(extra.values())} unexpected (e.g. {sorted(extra)[:10]})\n"
            + "\n".join(timeline) + f"\nreplaced threads: {thread_errors}\n"
            + first.log_tail(40) + "\n" + second.log_tail(40))
    assert closed == {"a": 0, "b": 0}, f"Streams instances did not close cleanly: {closed}"
    assert {"state": "RUNNING", "start": 2} in first.history, f"instance a never ran again: {first.history}"
    # Both closed cleanly, so no transaction of theirs may be left open on the output.
    wait_stable(cluster.bootstrap, {OUTPUT: PARTITIONS})
