"""W12's load: one transactional producer (confluent-kafka, librdkafka's transactional API) in a
process of its own, committing transactions of a fixed number of records as fast as it can.

A loop of ``begin_transaction`` -> ``produce`` x N -> ``commit_transaction``: every record is
sent inside a transaction and every transaction waits for its commit (EndTxn and the markers the
coordinator writes to every partition it touched) before the next one begins, so the
transaction path of the broker - AddPartitionsToTxn, idempotent produce, EndTxn, the
coordinator's ``__transaction_state`` writes and the WriteTxnMarkers to the partitions - is on
the measured path, not only its produce path. Record ``i`` of a transaction goes to partition
``i % partitions``: each transaction spans every partition of the topic, the same way on both
systems (no partitioner's stickiness decides how many markers a commit costs).

The process has its own interpreter (spawn), so the harness's resource sampler does not share
its GIL; it initialises the producer and commits warm-up transactions before it reports ready,
and times only the transactions after the harness says go.
"""

from __future__ import annotations

import multiprocessing
import queue
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Producer

from harness.clients import PRODUCER_BASE, payload

# acks=all and idempotence are what a transactional producer requires; linger as W1's producer
# (commit_transaction flushes what is left without waiting for it).
PRODUCER_SETTINGS: dict[str, Any] = {"acks": "all", "enable.idempotence": True, "linger.ms": 5}
WARMUP_TRANSACTIONS = 3
READY_TIMEOUT = 120.0


@dataclass(frozen=True)
class Load:
    bootstrap: str
    topic: str
    partitions: int
    transactions: int
    records_per_txn: int
    size: int
    transactional_id: str


@dataclass
class Result:
    seconds: float  # first begin_transaction -> last commit_transaction returned
    commits: int
    records: int
    commit_ms: list[float] = field(default_factory=list)  # each commit_transaction call
    error: str | None = None


def _transaction(producer: Any, load: Load, value: bytes) -> float:
    """One transaction; returns the seconds its commit_transaction call took."""
    producer.begin_transaction()
    for i in range(load.records_per_txn):
        partition = i % load.partitions
        while True:
            try:
                producer.produce(load.topic, value=value, partition=partition)
                break
            except BufferError:
                producer.poll(0.005)
    started = time.perf_counter()
    producer.commit_transaction(60)
    return time.perf_counter() - started


def _main(load: Load, go: Any, out: Any) -> None:
    try:
        producer = Producer({**PRODUCER_BASE, **PRODUCER_SETTINGS, "bootstrap.servers": load.bootstrap,
                             "transactional.id": load.transactional_id})
        producer.init_transactions(60)
        value = payload(load.size)
        for _ in range(WARMUP_TRANSACTIONS):
            _transaction(producer, load, value)
        out.put("ready")
        go.wait()
        commit_ms = []
        start = time.perf_counter()
        for _ in range(load.transactions):
            commit_ms.append(_transaction(producer, load, value) * 1e3)
        seconds = time.perf_counter() - start
        out.put(Result(seconds, load.transactions, load.transactions * load.records_per_txn, commit_ms))
    except Exception as exc:  # reported to the harness, which raises it
        out.put(Result(0.0, 0, 0, error=repr(exc)))


class TransactionalProducer:
    """``with TransactionalProducer(load) as p:`` starts the process and waits until it has
    initialised and warmed up; :meth:`run` times the transactions."""

    def __init__(self, load: Load, timeout: float = 900.0) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._go = ctx.Event()
        self._out: Any = ctx.Queue()
        self._process = ctx.Process(target=_main, args=(load, self._go, self._out), name="txn-producer",
                                    daemon=True)
        self._timeout = timeout

    def __enter__(self) -> TransactionalProducer:
        self._process.start()
        try:
            message = self._get(READY_TIMEOUT)
            if isinstance(message, Result):
                raise RuntimeError(f"transactional producer failed to start: {message.error}")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _get(self, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self._out.get(timeout=1.0)
            except queue.Empty:
                if not self._process.is_alive():
                    raise RuntimeError(f"transactional producer exited {self._process.exitcode}") from None
                if time.monotonic() > deadline:
                    raise TimeoutError(f"transactional producer silent for {timeout:.0f}s") from None

    def run(self) -> Result:
        self._go.set()
        result: Result = self._get(self._timeout)
        if result.error is not None:
            raise RuntimeError(f"transactional producer failed: {result.error}")
        return result

    def close(self) -> None:
        self._process.join(10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
