"""Transactional workloads and their checker for cluster fault tests (issue #16, acceptance 6).

- :class:`TxnFeeder`: a transactional producer writing numbered ids (``f<n>``) to every
  partition of the input topic, a few records per transaction, deliberately aborting some;
- :class:`TxnWorker`: a consume-transform-produce worker (confluent-kafka): a read_committed
  group consumer of the input and a transactional producer that writes, per input record, one
  record to each output topic and commits them with the consumed offsets
  (``send_offsets_to_transaction``) in one transaction; some transactions are deliberately
  aborted after their records reached the log, and the input is read again from the group's
  committed offsets;
- :func:`check_transactions`: what must hold afterwards (see there).

Every transaction attempt has a tag (``<client>.<incarnation>.<n>``) written into each of its
records, and the client remembers what it wrote under each tag and how the attempt ended:
``committed`` (commit_transaction returned), ``aborted`` (abort_transaction returned) or
``unknown`` (the producer failed in between; it is then replaced by a new one, whose
init_transactions fences the old and settles its transaction, as exactly-once applications do).
A client error never ends a client: faults are the point.

librdkafka (2.16) can block in ``send_offsets_to_transaction`` far past its timeout when the
group coordinator it cached has dropped out of the metadata (a fenced broker), as its issues
#5456 and #5511 describe: seen here for minutes after a paused group coordinator was fenced.
Every blocking transactional call therefore runs under a watchdog: one that overruns its timeout
by :data:`HANG_GRACE` seconds is given up, its producer left behind (never touched again) and a
new one of the same transactional id started, whose init_transactions fences the stuck one - what
an application's liveness check would do. The checks do not rely on the stuck producer: it is
fenced, so whatever it still sends is refused.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from support.cluster_workload import RESILIENT_CLIENT

# Short enough that a fault often outlasts a call, so the recovery paths run, not only retries
# inside the client.
CALL_TIMEOUT = 10.0
# How long past its own timeout a blocking librdkafka call may take before it counts as hung.
HANG_GRACE = 20.0
COMMITTED = "committed"
ABORTED = "aborted"
UNKNOWN = "unknown"

TXN_CLIENT: dict[str, Any] = {
    **RESILIENT_CLIENT,
    "linger.ms": 5,
    "request.timeout.ms": 10_000,
    "retry.backoff.ms": 50,
    "retry.backoff.max.ms": 500,
    # Longer than a fault plus recovery: a transaction fails only if the cluster stays broken.
    "transaction.timeout.ms": 60_000,
    "message.timeout.ms": 60_000,
}


@dataclass
class Attempt:
    tag: str
    outcome: str = UNKNOWN
    # (topic, partition, value) of every record produced in the attempt
    records: list[tuple[str, int, str]] = field(default_factory=list)
    # input offsets sent with it: (topic, partition) -> next offset
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    flushed: bool = False  # every record was acknowledged (in the log) before the end
    error: str = ""


class Hung(Exception):
    """A blocking librdkafka call overran its timeout by :data:`HANG_GRACE` seconds."""


def _watched(what: str, call: Callable[..., Any], *args: Any, timeout: float = CALL_TIMEOUT) -> Any:
    """``call(*args)`` on a thread of its own, waited for ``timeout`` + :data:`HANG_GRACE`
    seconds; raises :class:`Hung` if it is still blocked then (the thread is left behind)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call(*args)
        except BaseException as exc:  # re-raised in the caller
            outcome["error"] = exc

    thread = threading.Thread(target=run, name=f"watched-{what}", daemon=True)
    thread.start()
    thread.join(timeout + HANG_GRACE)
    if thread.is_alive():
        raise Hung(f"{what} still blocked {timeout + HANG_GRACE:.0f}s after it was called (timeout {timeout:.0f}s)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _error(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


class _TxnClient:
    """A transactional producer that survives faults: a failure it cannot recover from in place
    (fatal, or an abort that fails) replaces it with a new producer of the same transactional
    id (init_transactions fences the old one and aborts what it left open)."""

    def __init__(self, bootstrap: str, transactional_id: str, *, abort_every: int,
                 config: Mapping[str, Any] | None = None) -> None:
        self.bootstrap = bootstrap
        self.config = dict(config or {})
        self.transactional_id = transactional_id
        self.abort_every = abort_every
        self.attempts: list[Attempt] = []
        self.errors: list[str] = []  # client errors seen (expected under faults; for the report)
        self.incarnation = 0
        self.started = time.monotonic()
        self.producer: Producer | None = None
        self.abandoned: list[Producer] = []  # hung in a call: kept, never used or destroyed
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    # --- producer lifecycle ------------------------------------------------------------------

    def _note(self, text: str) -> None:
        with self.lock:
            self.errors.append(f"+{time.monotonic() - self.started:.1f}s {text}")

    def _abandon(self, attempt: Attempt | None, exc: Hung) -> None:
        """Leave a producer hung in a call behind and start a new one (which fences it)."""
        self._note(f"{attempt.tag if attempt else 'producer'}: {exc}; replacing the producer")
        if attempt is not None:
            attempt.error = str(exc)
        if self.producer is not None:
            # Destroying it would wait for the hung call; it must outlive this client.
            self.abandoned.append(self.producer)
            self.producer = None
        self._new_producer()

    def _new_producer(self) -> None:
        old, self.producer = self.producer, None
        if old is not None:
            with contextlib.suppress(KafkaException):
                old.purge()
            # The only reference: destroyed here, so it cannot go on with its own InitProducerId
            # in the background and fence the new one.
            del old
        producer: Producer | None = None
        while not self._stop.is_set():
            if producer is None:
                self.incarnation += 1
                producer = Producer({**TXN_CLIENT, "bootstrap.servers": self.bootstrap,
                                     "transactional.id": self.transactional_id,
                                     "client.id": f"{self.transactional_id}-{self.incarnation}", **self.config})
            try:
                _watched("init_transactions", producer.init_transactions, CALL_TIMEOUT)
            except Hung as exc:
                self._note(f"{exc}; starting another producer")
                self.abandoned.append(producer)
                producer = None
                continue
            except KafkaException as exc:
                self._note(f"init_transactions: {exc}")
                err = _error(exc)
                if err is None or not err.retriable():
                    producer = None  # fatal: start over with a new producer (this one is destroyed)
                time.sleep(0.5)
                continue
            self.producer = producer
            return

    def _begin(self) -> Attempt:
        assert self.producer is not None
        attempt = Attempt(f"{self.transactional_id}.{self.incarnation}.{len(self.attempts)}")
        with self.lock:
            self.attempts.append(attempt)
        self.producer.begin_transaction()
        return attempt

    def _produce(self, attempt: Attempt, topic: str, partition: int, value: str) -> None:
        assert self.producer is not None
        while True:
            try:
                self.producer.produce(topic, value=value.encode(), partition=partition)
                break
            except BufferError:
                self.producer.poll(0.05)
        attempt.records.append((topic, partition, value))

    def _abort_now(self) -> bool:
        return len(self.attempts) % self.abort_every == 0

    def _finish(self, attempt: Attempt, abort: bool) -> bool:
        """Commit (or deliberately abort) the attempt; on failure settle it as Kafka's
        transactional API prescribes. True if committed."""
        assert self.producer is not None
        try:
            if abort:
                # Flushed first, so the aborted records are in the log for read_uncommitted.
                attempt.flushed = self.producer.flush(CALL_TIMEOUT) == 0
                _watched("abort_transaction", self.producer.abort_transaction, CALL_TIMEOUT)
                attempt.outcome = ABORTED
                return False
            while True:
                try:
                    _watched("commit_transaction", self.producer.commit_transaction, CALL_TIMEOUT)
                    attempt.outcome = COMMITTED
                    return True
                except KafkaException as exc:
                    err = _error(exc)
                    if err is not None and err.retriable() and not self._stop.is_set():
                        self._note(f"{attempt.tag} commit (retrying): {exc}")
                        continue
                    raise
        except Hung as exc:
            self._abandon(attempt, exc)
            return False
        except KafkaException as exc:
            err = _error(exc)
            attempt.error = str(exc)
            self._note(f"{attempt.tag}: {exc}")
            if err is not None and err.txn_requires_abort() and not err.fatal():
                try:
                    _watched("abort_transaction", self.producer.abort_transaction, CALL_TIMEOUT)
                    attempt.outcome = ABORTED
                    return False
                except KafkaException as again:
                    self._note(f"{attempt.tag} abort: {again}")
                except Hung as again:
                    self._abandon(attempt, again)
                    return False
            self._new_producer()
            return False

    def _begin_or_renew(self) -> Attempt | None:
        try:
            return self._begin()
        except KafkaException as exc:
            self._note(f"begin_transaction: {exc}")
            self._new_producer()
            return None

    def _settle_failed(self, attempt: Attempt, exc: KafkaException) -> None:
        assert self.producer is not None
        err = _error(exc)
        attempt.error = str(exc)
        self._note(f"{attempt.tag}: {exc}")
        if err is not None and not err.fatal():
            try:
                _watched("abort_transaction", self.producer.abort_transaction, CALL_TIMEOUT)
                attempt.outcome = ABORTED
                return
            except KafkaException as again:
                self._note(f"{attempt.tag} abort: {again}")
            except Hung as again:
                self._abandon(attempt, again)
                return
        self._new_producer()

    # --- thread ------------------------------------------------------------------------------

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._main, name=f"txn-{self.transactional_id}", daemon=True)
        self._thread.start()
        return self

    def _main(self) -> None:
        try:
            self._new_producer()
            self._run()
        except BaseException as exc:  # surfaced by stop()
            self._failure = exc

    def _run(self) -> None:
        raise NotImplementedError

    def stop(self, timeout: float = 120.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
            frame = sys._current_frames().get(self._thread.ident or -1)
            if self._thread.is_alive() and frame is not None:
                raise RuntimeError(f"{self.transactional_id} did not stop within {timeout:.0f}s; its thread is at\n"
                                   + "".join(traceback.format_stack(frame)))
        if self._failure is not None:
            raise RuntimeError(f"{self.transactional_id} failed") from self._failure

    def outcomes(self) -> Counter[str]:
        with self.lock:
            return Counter(a.outcome for a in self.attempts)


class TxnFeeder(_TxnClient):
    """Writes ids ``<prefix><n>`` to the input, ``per_txn`` records a transaction round robin
    over its partitions (so each transaction spans them all), about ``rate`` records/s."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, *, transactional_id: str = "feeder",
                 per_txn: int = 8, rate: float = 150.0, abort_every: int = 4) -> None:
        super().__init__(bootstrap, transactional_id, abort_every=abort_every)
        self.topic = topic
        self.partitions = partitions
        self.per_txn = per_txn
        self.rate = rate
        self.next_id = 0

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            attempt = self._begin_or_renew()
            if attempt is None:
                continue
            try:
                for i in range(self.per_txn):
                    value = f"f{self.next_id}|{attempt.tag}"
                    self.next_id += 1
                    self._produce(attempt, self.topic, i % self.partitions, value)
            except KafkaException as exc:
                self._settle_failed(attempt, exc)
                continue
            self._finish(attempt, abort=self._abort_now())
            next_at += self.per_txn / self.rate
            self._stop.wait(max(0.0, next_at - time.monotonic()))
            next_at = max(next_at, time.monotonic() - 1.0)


@dataclass(frozen=True)
class Consumed:
    partition: int
    offset: int
    value: str


class TxnWorker(_TxnClient):
    """Consume-transform-produce: each input record ``<id>|<feeder tag>`` at (p, o) becomes
    ``<id>|p:o|<tag>`` in ``outputs[0]`` partition p and in ``outputs[1]`` partition
    ``number(id) % partitions`` (so a transaction spans partitions of both), committed with the
    input offsets."""

    def __init__(self, bootstrap: str, group: str, source: str, outputs: Sequence[str], partitions: int, *,
                 transactional_id: str, batch: int = 20, abort_every: int = 5,
                 config: Mapping[str, Any] | None = None) -> None:
        super().__init__(bootstrap, transactional_id, abort_every=abort_every, config=config)
        self.group = group
        self.source = source
        self.outputs = list(outputs)
        self.partitions = partitions
        self.batch = batch
        self.consumed: list[Consumed] = []  # every input record handed to this worker
        self.rewinds = 0
        self.consumer = Consumer({
            **RESILIENT_CLIENT,
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": f"{transactional_id}-consumer",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 1000,
            "enable.partition.eof": False,
        })

    def _run(self) -> None:
        self.consumer.subscribe([self.source])
        try:
            while not self._stop.is_set():
                msgs = self.consumer.consume(num_messages=self.batch, timeout=0.3)
                data: list[Message] = []
                for msg in msgs:
                    if msg.error() is not None:
                        self._note(f"consume: {msg.error()}")
                    else:
                        data.append(msg)
                if data:
                    self._transform(data)
        finally:
            self.consumer.close()

    def _transform(self, msgs: list[Message]) -> None:
        attempt = self._begin_or_renew()
        if attempt is None:
            self._rewind()
            return
        try:
            for msg in msgs:
                partition, offset = int(msg.partition() or 0), int(msg.offset() or 0)
                value = bytes(msg.value() or b"").decode()
                with self.lock:
                    self.consumed.append(Consumed(partition, offset, value))
                ident = value.split("|")[0]
                out = f"{ident}|{partition}:{offset}|{attempt.tag}"
                self._produce(attempt, self.outputs[0], partition, out)
                self._produce(attempt, self.outputs[1], int(ident.lstrip("f")) % self.partitions, out)
                attempt.offsets[(self.source, partition)] = offset + 1
            assert self.producer is not None
            _watched("send_offsets_to_transaction", self.producer.send_offsets_to_transaction,
                     [TopicPartition(t, p, o) for (t, p), o in attempt.offsets.items()],
                     self.consumer.consumer_group_metadata(), CALL_TIMEOUT)
        except Hung as exc:
            self._abandon(attempt, exc)
            self._rewind()
            return
        except KafkaException as exc:
            # Settled by _finish as a failed commit would be (abortable: abort; else new producer).
            self._settle_failed(attempt, exc)
            self._rewind()
            return
        if not self._finish(attempt, abort=self._abort_now()):
            self._rewind()

    def _rewind(self) -> None:
        """Back to the group's committed offsets (the beginning where none), as the next
        transaction must start where the last committed one ended."""
        self.rewinds += 1
        while not self._stop.is_set():
            try:
                assignment = self.consumer.assignment()
                if not assignment:
                    return
                for tp in self.consumer.committed(assignment, timeout=CALL_TIMEOUT):
                    offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                    self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
                return
            except KafkaException as exc:
                self._note(f"rewind: {exc}")
                time.sleep(0.5)

    def snapshot(self) -> list[Consumed]:
        with self.lock:
            return list(self.consumed)


# --- the checker -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Read:
    """One output or input record as a reader got it."""

    topic: str
    partition: int
    offset: int
    value: str

    @property
    def tag(self) -> str:
        return self.value.rsplit("|", 1)[-1]


def _examples(items: Sequence[object], limit: int = 6) -> str:
    shown = ", ".join(str(i) for i in items[:limit])
    return f"{len(items)} ({shown}{', ...' if len(items) > limit else ''})"


def check_attempts(attempts: Sequence[Attempt], committed: Sequence[Read], uncommitted: Sequence[Read],
                   what: str) -> list[str]:
    """Per transaction attempt, against what read_committed and read_uncommitted readers got:
    no record of an aborted attempt is read committed; a committed attempt's records are all
    there; any attempt is all there or not at all (no torn transaction); nothing read belongs
    to no attempt; every record read is read once."""
    problems: list[str] = []
    by_tag = {a.tag: a for a in attempts}
    seen: dict[str, Counter[tuple[str, int, str]]] = {}
    for r in committed:
        seen.setdefault(r.tag, Counter())[(r.topic, r.partition, r.value)] += 1
    foreign = sorted({r.tag for r in [*committed, *uncommitted]} - set(by_tag))
    if foreign:
        problems.append(f"{what}: records of unknown transactions {_examples(foreign)}")
    aborted_read = sorted(t for t in seen if t in by_tag and by_tag[t].outcome == ABORTED)
    if aborted_read:
        problems.append(f"{what}: read_committed returned records of aborted transactions {_examples(aborted_read)}")
    twice = sorted((t, rec) for t, c in seen.items() for rec, n in c.items() if n > 1)
    if twice:
        problems.append(f"{what}: records read twice {_examples(twice)}")
    for attempt in attempts:
        got = set(seen.get(attempt.tag, Counter()))
        wanted = set(attempt.records)
        if attempt.outcome == COMMITTED and got != wanted:
            problems.append(f"{what}: committed transaction {attempt.tag} has {len(got & wanted)} of its "
                            f"{len(wanted)} records; missing {_examples(sorted(wanted - got))}")
        elif attempt.outcome == UNKNOWN and got and got != wanted:
            problems.append(f"{what}: torn transaction {attempt.tag} ({attempt.error}): {len(got & wanted)} of "
                            f"{len(wanted)} records; missing {_examples(sorted(wanted - got))}")
        if got - wanted:
            problems.append(f"{what}: transaction {attempt.tag} has records it never wrote "
                            f"{_examples(sorted(got - wanted))}")
    return problems


def check_offsets(observed: Mapping[int, Sequence[tuple[float, int]]], attempts: Sequence[Attempt],
                  committed: Sequence[Read], topic: str) -> list[str]:
    """Offsets side of "whole or absent": every committed group offset ever observed for an input
    partition was sent by a transaction whose records are read committed (offsets never became
    visible without their records)."""
    visible = {r.tag for r in committed}
    sent: dict[int, set[int]] = {}
    for attempt in attempts:
        if attempt.tag in visible:
            for (t, p), offset in attempt.offsets.items():
                if t == topic:
                    sent.setdefault(p, set()).add(offset)
    problems = []
    for p, values in observed.items():
        strays = sorted({o for _, o in values if o >= 0 and o not in sent.get(p, set())})
        if strays:
            problems.append(f"{topic} partition {p}: committed offsets no visible transaction sent "
                            f"(offsets without their records) {_examples(strays)}")
    return problems


def check_outputs(inputs: Sequence[Read], outputs: Mapping[str, Sequence[Read]]) -> list[str]:
    """Every committed input record (partition, offset, id) is in each output topic exactly once."""
    problems: list[str] = []
    wanted = Counter(f"{r.value.split('|')[0]}|{r.partition}:{r.offset}" for r in inputs)
    for topic, records in outputs.items():
        got = Counter("|".join(r.value.split("|")[:2]) for r in records)
        missing = sorted(wanted - got)
        extra = sorted(got - wanted)
        if missing:
            problems.append(f"{topic}: lost committed inputs {_examples(missing)} of {len(wanted)}")
        dupes = sorted(k for k in extra if k in wanted)
        if dupes:
            problems.append(f"{topic}: committed inputs written more than once {_examples(dupes)}")
        strangers = sorted(k for k in extra if k not in wanted)
        if strangers:
            problems.append(f"{topic}: outputs of inputs that are not committed input records "
                            f"{_examples(strangers)}")
    return problems


def check_consumed(workers: Sequence[TxnWorker], inputs: Sequence[Read]) -> list[str]:
    """The workers' read_committed consumers only ever got committed input records."""
    committed = {(r.partition, r.offset): r.value for r in inputs}
    problems: list[str] = []
    for worker in workers:
        wrong = [c for c in worker.snapshot() if committed.get((c.partition, c.offset)) != c.value]
        if wrong:
            problems.append(f"worker {worker.transactional_id}: its read_committed consumer got records that are "
                            f"not committed input (aborted or foreign) {_examples(wrong)}")
    return problems


def read_topic(bootstrap: str, topic: str, partitions: int, isolation: str, *,
               timeout: float = 120.0) -> list[Read]:
    """Every record an ``isolation`` consumer reads from the beginning to its end (EOF: the
    LSO for read_committed, the high watermark otherwise)."""
    consumer = Consumer({**RESILIENT_CLIENT, "bootstrap.servers": bootstrap, "group.id": "txn-checker-unused",
                         "enable.auto.commit": False, "enable.partition.eof": True, "isolation.level": isolation})
    records: list[Read] = []
    todo = set(range(partitions))
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in todo])
        deadline = time.monotonic() + timeout
        while todo:
            if time.monotonic() > deadline:
                raise AssertionError(f"{isolation} reader did not reach the end of {topic} partitions "
                                     f"{sorted(todo)} in {timeout:.0f}s")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    todo.discard(int(msg.partition() or 0))
                    continue
                raise KafkaException(err)
            records.append(Read(topic, int(msg.partition() or 0), int(msg.offset() or 0),
                                bytes(msg.value() or b"").decode()))
    finally:
        consumer.close()
    return records


def wait_for(predicate: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # not yet
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last error {last!r}")
        time.sleep(interval)
