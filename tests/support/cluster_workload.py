"""Workloads and checkers for cluster fault tests: numbered producers, a consumer group, a
committed-offset monitor, and checks of replicas' logs against what was acknowledged.

Records carry their identity: the key names the stream (``<producer>/<partition>``) and the
value is the stream's sequence number, so any copy of a partition's log can be checked for
loss (an acknowledged number missing or at another offset), duplicates and order.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from riverlog.protocol.record_batch import Record

from support.process_cluster import ProcessCluster

# Client settings that make confluent-kafka notice dead, frozen or cut-off nodes quickly and
# retry for as long as a test runs, instead of failing records.
RESILIENT_CLIENT: dict[str, Any] = {
    "socket.connection.setup.timeout.ms": 5000,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 500,
    "topic.metadata.refresh.interval.ms": 1000,
    # Connection failures are the point of these tests; librdkafka would print each one.
    "log_level": 2,
}


def create_topic(cluster: ProcessCluster, name: str, *, partitions: int = 1, replication: int = 3,
                 config: Mapping[str, str] | None = None, timeout: float = 60.0) -> None:
    """CreateTopics, then wait until every partition has a leader and a complete ISR.

    Sent with kafka-python (pure Python), not librdkafka's Admin API, which can abort the
    process when brokers fail (see support/kafka_wire.py); tests create topics right after
    faults."""
    from kafka.admin import KafkaAdminClient

    servers = [n.bootstrap for n in cluster.nodes if n.reachable]
    admin = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=30_000, client_id="create-topic")
    try:
        admin.create_topics({name: {"num_partitions": partitions, "replication_factor": replication,
                                    "configs": dict(config or {})}}, timeout_ms=30_000)
    finally:
        admin.close()

    def ready() -> bool:
        states = [cluster.partition_state(name, p) for p in range(partitions)]
        return all(s.leader >= 0 and len(s.replicas) == replication and set(s.isr) == set(s.replicas)
                   for s in states)

    cluster.wait_until(ready, timeout=timeout, what=f"topic {name} with leaders and full ISRs")


def stream_key(producer: str, partition: int) -> bytes:
    return f"{producer}/{partition}".encode()


@dataclass
class Ack:
    partition: int
    seq: int
    offset: int
    enqueued: float  # time.monotonic() when handed to the client
    acked: float  # time.monotonic() of the delivery report


class SequencedProducer:
    """An idempotent acks=all producer writing 0, 1, 2, ... to each of its partitions (round
    robin, about ``rate`` records/s in all) from its own thread until :meth:`stop`."""

    def __init__(self, bootstrap: str, topic: str, partitions: Sequence[int], *, name: str = "p",
                 rate: float = 500.0, max_pending: int = 2000, config: Mapping[str, Any] | None = None) -> None:
        self.topic = topic
        self.partitions = list(partitions)
        self.name = name
        self.rate = rate
        self.max_pending = max_pending
        self.producer = Producer({
            **RESILIENT_CLIENT,
            "bootstrap.servers": bootstrap,
            "client.id": f"seq-producer-{name}",
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": "none",
            "linger.ms": 5,
            # Longer than any fault: a record is retried until it is written, never dropped.
            "message.timeout.ms": 300_000,
            "request.timeout.ms": 10_000,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 500,
            **(config or {}),
        })
        self.next_seq = {p: 0 for p in self.partitions}
        self.acks: list[Ack] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    # --- running -----------------------------------------------------------------------------

    def start(self) -> SequencedProducer:
        self._thread = threading.Thread(target=self._run, name=f"producer-{self.name}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            interval = 1.0 / self.rate
            next_at = time.monotonic()
            i = 0
            while not self._stop.is_set():
                if self.pending() >= self.max_pending:
                    self.producer.poll(0.01)
                    continue
                partition = self.partitions[i % len(self.partitions)]
                i += 1
                seq = self.next_seq[partition]
                self.next_seq[partition] = seq + 1
                callback = functools.partial(self._delivered, partition, seq, time.monotonic())
                while True:
                    try:
                        self.producer.produce(self.topic, key=stream_key(self.name, partition),
                                              value=str(seq).encode(), partition=partition, on_delivery=callback)
                        break
                    except BufferError:
                        self.producer.poll(0.05)
                next_at += interval
                self.producer.poll(max(0.0, next_at - time.monotonic()))
        except BaseException as exc:  # surfaced by stop()
            self._failure = exc

    def _delivered(self, partition: int, seq: int, enqueued: float, err: Any, msg: Any) -> None:
        now = time.monotonic()
        with self.lock:
            if err is None:
                self.acks.append(Ack(partition, seq, msg.offset(), enqueued, now))
            else:
                self.errors.append(f"{self.name} partition {partition} seq {seq}: {err}")

    def sent(self) -> int:
        return sum(self.next_seq.values())

    def pending(self) -> int:
        with self.lock:
            return self.sent() - len(self.acks) - len(self.errors)

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acks)

    def stop(self, flush_timeout: float = 120.0) -> int:
        """Stop producing and wait for every outstanding record's outcome; returns how many
        are still undecided (0 when all were acknowledged or failed)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        remaining = int(self.producer.flush(flush_timeout))
        if self._failure is not None:
            raise RuntimeError(f"producer {self.name} thread failed") from self._failure
        return remaining

    # --- results -----------------------------------------------------------------------------

    def acked(self, partition: int) -> dict[bytes, dict[int, int]]:
        """{stream key: {seq: offset}} of the acknowledged records of one partition."""
        with self.lock:
            seqs = {a.seq: a.offset for a in self.acks if a.partition == partition}
        return {stream_key(self.name, partition): seqs}

    def first_ack_enqueued_after(self, moment: float) -> Ack | None:
        """The earliest acknowledged record handed to the client after ``moment``."""
        with self.lock:
            later = [a for a in self.acks if a.enqueued > moment]
        return min(later, key=lambda a: a.acked, default=None)

    def longest_ack_gap_around(self, moment: float, before: float = 1.0) -> float:
        """The longest pause between consecutive acknowledgements from ``before`` seconds
        ahead of ``moment`` on: how long the stream could not get writes through."""
        with self.lock:
            times = sorted(a.acked for a in self.acks if a.acked > moment - before)
        return max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)


def merge_acked(*maps: Mapping[bytes, Mapping[int, int]]) -> dict[bytes, dict[int, int]]:
    merged: dict[bytes, dict[int, int]] = {}
    for m in maps:
        for key, seqs in m.items():
            merged.setdefault(key, {}).update(seqs)
    return merged


# --- checks on a copy of a partition ---------------------------------------------------------


def _examples(items: Sequence[object], limit: int = 8) -> str:
    shown = ", ".join(str(i) for i in items[:limit])
    return f"{len(items)} ({shown}{', ...' if len(items) > limit else ''})"


def check_partition_copy(records: Sequence[Record], acked: Mapping[bytes, Mapping[int, int]], *,
                         where: str) -> list[str]:
    """Problems with one copy of a partition's log (a replica's segments or what a consumer
    read): offsets not increasing; per stream, a number twice (duplicate) or below an earlier
    one (reordered); an acknowledged number missing or at another offset than acknowledged."""
    problems: list[str] = []
    previous = -1
    found: dict[bytes, dict[int, int]] = {}
    highest: dict[bytes, int] = {}
    duplicates: dict[bytes, list[tuple[int, int, int]]] = {}
    reordered: dict[bytes, list[tuple[int, int]]] = {}
    for record in records:
        if record.offset <= previous:
            problems.append(f"{where}: offset {record.offset} follows offset {previous}")
        previous = record.offset
        key = record.key or b""
        try:
            seq = int(record.value or b"")
        except ValueError:
            problems.append(f"{where}: offset {record.offset} holds a foreign value {record.value!r}")
            continue
        seen = found.setdefault(key, {})
        if seq in seen:
            duplicates.setdefault(key, []).append((seq, seen[seq], record.offset))
            continue
        if seq < highest.get(key, -1):
            reordered.setdefault(key, []).append((seq, record.offset))
        seen[seq] = record.offset
        highest[key] = max(highest.get(key, -1), seq)
    for key, items in duplicates.items():
        problems.append(f"{where}: stream {key.decode()} duplicates (seq, first offset, again at) "
                        f"{_examples(items)}")
    for key, order in reordered.items():
        problems.append(f"{where}: stream {key.decode()} out of order (seq, offset) {_examples(order)}")
    for key, acks in acked.items():
        seen = found.get(key, {})
        missing = sorted(s for s in acks if s not in seen)
        if missing:
            problems.append(f"{where}: stream {key.decode()} lost acknowledged seqs {_examples(missing)} "
                            f"of {len(acks)} acknowledged")
        moved = sorted((s, o, seen[s]) for s, o in acks.items() if s in seen and seen[s] != o)
        if moved:
            problems.append(f"{where}: stream {key.decode()} seqs away from their acknowledged offset "
                            f"(seq, acked offset, found at) {_examples(moved)}")
    return problems


def compare_copies(copies: Mapping[str, Sequence[Record]]) -> list[str]:
    """Problems if the copies (name -> records) are not the same records at the same offsets."""
    problems: list[str] = []
    items = list(copies.items())
    if not items:
        return problems
    first_name, first = items[0]
    reference = [(r.offset, r.key, r.value) for r in first]
    for name, records in items[1:]:
        other = [(r.offset, r.key, r.value) for r in records]
        if other == reference:
            continue
        at = next((i for i, (a, b) in enumerate(zip(reference, other, strict=False)) if a != b),
                  min(len(reference), len(other)))
        theirs = other[at] if at < len(other) else "end"
        ours = reference[at] if at < len(reference) else "end"
        problems.append(f"{name} differs from {first_name}: {len(other)} vs {len(reference)} records, "
                        f"first difference at index {at}: {theirs} vs {ours}")
    return problems


def format_problems(problems: Sequence[str], limit: int = 60) -> str:
    shown = list(problems[:limit])
    if len(problems) > limit:
        shown.append(f"... and {len(problems) - limit} more")
    return "\n".join(shown)


# --- reading through the protocol ------------------------------------------------------------


def end_offsets(bootstrap: str, topic: str, partitions: Iterable[int], timeout: float = 10.0) -> dict[int, int]:
    """Each partition's high watermark, asked of its leader."""
    consumer = Consumer({**RESILIENT_CLIENT, "bootstrap.servers": bootstrap, "group.id": "end-offsets-probe",
                         "enable.auto.commit": False})
    try:
        return {p: int(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1])
                for p in partitions}
    finally:
        consumer.close()


def read_partition(bootstrap: str, topic: str, partition: int, end: int, timeout: float = 60.0) -> list[Record]:
    """The records of ``[0, end)`` as a consumer gets them from the partition's leader."""
    consumer = Consumer({**RESILIENT_CLIENT, "bootstrap.servers": bootstrap, "group.id": "partition-reader",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    records: list[Record] = []
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + timeout
        while (not records or records[-1].offset < end - 1) and end > 0:
            if time.monotonic() > deadline:
                raise AssertionError(f"read only up to {records[-1].offset if records else -1} of "
                                     f"{topic}-{partition} (end {end}) in {timeout:.0f}s")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            if _known(msg.offset()) < end:
                records.append(Record(_known(msg.offset()), msg.timestamp()[1], msg.key(), msg.value(), ()))
        return records
    finally:
        consumer.close()


def _known(value: int | None) -> int:
    # A message without an error always has its partition and offset.
    assert value is not None
    return value


# --- a consumer group and its committed offsets ----------------------------------------------


@dataclass
class Consumed:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass
class GroupMember:
    """One member of a consumer group, in its own thread: polls, records what it gets and
    commits what it consumed (synchronously, every ``commit_interval``). ``protocol`` is the
    group protocol: ``classic`` (JoinGroup/SyncGroup) or ``consumer`` (KIP-848, issue #21),
    whose session and heartbeat timings are the brokers' (``group.consumer.*``)."""

    bootstrap: str
    group: str
    topic: str
    name: str
    commit_interval: float = 0.3
    protocol: str = "classic"
    consumed: list[Consumed] = field(default_factory=list)
    commit_errors: list[str] = field(default_factory=list)
    poll_errors: list[str] = field(default_factory=list)
    commits: int = 0

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        timings: dict[str, Any] = (
            {"group.protocol": "consumer"} if self.protocol == "consumer"
            else {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}
        )
        self.consumer = Consumer({
            **RESILIENT_CLIENT,
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "client.id": f"member-{self.name}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **timings,
            "enable.partition.eof": False,
        })

    def start(self) -> GroupMember:
        self.consumer.subscribe([self.topic])
        self._thread = threading.Thread(target=self._run, name=f"member-{self.name}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            last_commit = time.monotonic()
            while not self._stop.is_set():
                msg = self.consumer.poll(0.2)
                if msg is not None:
                    if msg.error():
                        with self.lock:
                            self.poll_errors.append(str(msg.error()))
                    else:
                        with self.lock:
                            self.consumed.append(
                                Consumed(_known(msg.partition()), _known(msg.offset()), msg.key(), msg.value()))
                if time.monotonic() - last_commit >= self.commit_interval:
                    self._commit()
                    last_commit = time.monotonic()
            self._commit()
        except BaseException as exc:  # surfaced by stop()
            self._failure = exc
        finally:
            self.consumer.close()

    def _commit(self) -> None:
        # Commits what poll() handed out (librdkafka's offset store) for the partitions this
        # member owns now: a member never commits for a partition it lost.
        try:
            self.consumer.commit(asynchronous=False)
            self.commits += 1
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._NO_OFFSET:
                with self.lock:
                    self.commit_errors.append(str(exc))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        if self._failure is not None:
            raise RuntimeError(f"group member {self.name} failed") from self._failure

    def snapshot(self) -> list[Consumed]:
        with self.lock:
            return list(self.consumed)


class CommittedOffsetMonitor:
    """Polls a group's committed offsets (OffsetFetch from the group coordinator, through a
    consumer that never joins the group) and records every observation, so a commit that moves
    backwards or vanishes is caught."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: Sequence[int],
                 interval: float = 0.5) -> None:
        self.group = group
        self.topic = topic
        self.partitions = list(partitions)
        self.interval = interval
        # Not librdkafka's Admin API (see support/kafka_wire.py): a group consumer's
        # committed() goes through its own coordinator lookup. It never subscribes, so it is
        # never a member and never commits.
        self.consumer = Consumer({**RESILIENT_CLIENT, "bootstrap.servers": bootstrap, "group.id": group,
                                  "client.id": f"offset-monitor-{group}", "enable.auto.commit": False})
        # partition -> [(time since start, committed offset; negative: none)]
        self.observations: dict[int, list[tuple[float, int]]] = {p: [] for p in self.partitions}
        self.errors = 0
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> CommittedOffsetMonitor:
        self._thread = threading.Thread(target=self._run, name=f"offsets-{self.group}", daemon=True)
        self._thread.start()
        return self

    def committed(self, timeout: float = 5.0) -> dict[int, int]:
        with self._lock:
            answer = self.consumer.committed([TopicPartition(self.topic, p) for p in self.partitions],
                                             timeout=timeout)
        out: dict[int, int] = {}
        for tp in answer:
            if tp.error is not None:
                raise KafkaException(tp.error)
            out[tp.partition] = int(tp.offset)
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                offsets = self.committed()
            except Exception:  # coordinator moving, node down: try again
                self.errors += 1
            else:
                at = time.monotonic() - self._start
                for p, offset in offsets.items():
                    self.observations[p].append((at, offset))
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def close(self) -> None:
        self.stop()
        with self._lock:
            self.consumer.close()

    def backward_moves(self) -> list[str]:
        """Every observation below an earlier one (a vanished commit counts: once a partition
        had a committed offset, "none" is a move backwards)."""
        problems = []
        for p, observed in self.observations.items():
            best = -1
            best_at = 0.0
            for at, offset in observed:
                if best >= 0 and offset < best:
                    problems.append(f"group {self.group} partition {p}: committed offset {offset} at "
                                    f"+{at:.1f}s after {best} at +{best_at:.1f}s")
                if offset > best:
                    best, best_at = offset, at
        return problems
