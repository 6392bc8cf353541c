"""OpenMessaging-Benchmark-style load (issue #15): P producers and P consumers on one topic, each
client a process of its own (its own interpreter and GIL, so one client's Python loop does not
delay another's), all on this machine next to the broker.

Every record carries the wall-clock time of its send and the id of the step it belongs to in
its first 12 bytes. A producer measures *publish latency* (send -> acknowledgement, librdkafka's
own per-record measure); a consumer measures *end-to-end latency* (the stamped send time -> the
moment the consumer has the record; one clock serves both ends on one machine). Both land in
:class:`Histogram`\\ s per step, which the processes send to the harness to merge.

A step offers a rate for a number of seconds; :func:`fixed_rate` is one long step with a warm-up,
:func:`max_rate` a search over steps of rising rate for the highest one the system sustains.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import queue
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from harness.clients import CONSUMER_BASE, PRODUCER_BASE, payload

HEADER = struct.Struct(">qi")  # send time (ns since the epoch), step id
PROBE = -1  # step id of the records that tell a consumer it is fetching
# OMB's Kafka driver's producer settings: acks=all, linger 1 ms, 1 MiB batches.
PRODUCER_SETTINGS: dict[str, Any] = {"acks": "all", "linger.ms": 1}
REPORT_S = 0.5  # a consumer sends its latencies to the harness this often
BATCH = 1000  # records a consumer takes from librdkafka's queue at once
SHORTFALL = 0.05  # a step is sustained if it delivers at least 95% of the offered rate
CATCH_UP_S = 5.0  # consumers must have every acknowledged record this long after a step
SETTLE_S = 30.0  # before the next step, at most this long for a backlog to clear (unmeasured)
READY_TIMEOUT = 120.0


def log(message: str) -> None:
    # The runner's format (runner.log), without importing it: runner imports the workloads.
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Histogram:
    """Counts of latencies in microseconds, in buckets of 1/64 of a power of two (at most 1.6%
    wide): small to send between processes and to merge, unlike millions of raw values."""

    SIGNIFICANT = 7  # bits kept of each value

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.total = 0

    def record(self, micros: int) -> None:
        micros = max(0, micros)  # a wall clock stepped back mid-run must not make a bucket of its own
        shift = max(0, micros.bit_length() - self.SIGNIFICANT)
        key = (shift << self.SIGNIFICANT) | (micros >> shift)
        self.counts[key] = self.counts.get(key, 0) + 1
        self.total += 1

    def merge(self, other: Histogram) -> None:
        for key, count in other.counts.items():
            self.counts[key] = self.counts.get(key, 0) + count
        self.total += other.total

    def percentile_ms(self, q: float) -> float:
        """The value below which a fraction ``q`` of the records lie (the bucket's middle)."""
        if not self.total:
            return 0.0
        rank = max(1, math.ceil(q * self.total))
        seen = 0
        for key in sorted(self.counts):
            seen += self.counts[key]
            if seen >= rank:
                shift, base = key >> self.SIGNIFICANT, key & ((1 << self.SIGNIFICANT) - 1)
                return ((base << shift) + ((1 << shift) - 1) / 2) / 1000
        raise AssertionError("unreachable: the counts add up to total")


def percentiles(prefix: str, hist: Histogram) -> dict[str, float]:
    """OMB's percentiles: p50, p99, p99.9, p99.99 (``<prefix>_p9999_ms``)."""
    return {f"{prefix}_{name}_ms": hist.percentile_ms(q)
            for name, q in (("p50", 0.50), ("p99", 0.99), ("p999", 0.999), ("p9999", 0.9999))}


@dataclass(frozen=True)
class Step:
    """One producer's part of a step."""

    step: int  # the id stamped into the measured records
    warm_step: int  # the id of the records sent during the warm-up (left out of the latencies)
    rate: float  # records/s of this producer
    seconds: float
    warmup_s: float
    start_at: float  # time.time() at which every producer begins


@dataclass
class StepReport:
    """What a producer did in one step."""

    producer: int
    step: int
    sent: int
    acked: int
    undelivered: int
    total_s: float  # from the start to the last acknowledgement (or the flush's time limit)
    publish: Histogram
    errors: list[str] = field(default_factory=list)


# --- the client processes ----------------------------------------------------------------------


def _consumer_main(bootstrap: str, topic: str, partitions: list[int], index: int, stop: Any, out: Any) -> None:
    consumer = Consumer({**CONSUMER_BASE, "bootstrap.servers": bootstrap, "group.id": f"omb-{index}"})
    # assign(), not a group subscription: a rebalance during a step would be a pause neither
    # broker is responsible for. Each consumer has its own slice of the partitions.
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    ready = False
    pending: dict[int, Histogram] = {}
    last_report = time.monotonic()
    while not stop.is_set():
        batch = _next_batch(consumer)
        now = time.time_ns()
        for msg in batch:
            value = msg.value()
            if msg.error() is not None or value is None:
                continue
            sent, step = HEADER.unpack_from(value)
            if step == PROBE:
                if not ready:
                    ready = True
                    out.put(("ready", index))
                continue
            pending.setdefault(step, Histogram()).record((now - sent) // 1000)
        if pending and time.monotonic() - last_report >= REPORT_S:
            out.put(("latencies", index, pending))
            pending, last_report = {}, time.monotonic()
    if pending:
        out.put(("latencies", index, pending))
    consumer.close()


def _next_batch(consumer: Consumer) -> list[Any]:
    """Whatever librdkafka already holds, without waiting; else wait briefly for one record:
    consume(n, timeout) would wait for n records, adding its timeout to every latency."""
    batch = consumer.consume(BATCH, 0)
    if batch:
        return batch
    msg = consumer.poll(0.05)
    return [] if msg is None else [msg]


def _producer_main(bootstrap: str, topic: str, partitions: int, size: int, index: int, commands: Any,
                   out: Any) -> None:
    producer = Producer({**PRODUCER_BASE, **PRODUCER_SETTINGS, "bootstrap.servers": bootstrap})
    body = bytearray(payload(size))
    # A probe to every partition: the connections and metadata are in place before any
    # measurement, and every consumer sees a record on its partitions once it is fetching.
    for p in range(partitions):
        HEADER.pack_into(body, 0, time.time_ns(), PROBE)
        producer.produce(topic, value=bytes(body), partition=p)
    if producer.flush(60):
        raise RuntimeError(f"producer {index}: probes undelivered")
    out.put(("ready", index))
    while (command := commands.get()) is not None:
        out.put(("step", _produce_step(producer, topic, body, command, index)))
    producer.flush(30)


def _produce_step(producer: Producer, topic: str, body: bytearray, command: Step, index: int) -> StepReport:
    hist = Histogram()
    acked = [0]
    errors: list[str] = []

    def measured(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
            return
        acked[0] += 1
        hist.record(int((msg.latency() or 0.0) * 1e6))

    def warming(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[0] += 1

    target = int(command.rate * command.seconds)
    time.sleep(max(0.0, command.start_at - time.time()))
    start = time.perf_counter()
    sent = _paced_sends(producer, topic, body, command, target, start, measured, warming)
    # Every record's acknowledgement belongs to the step: a backlog the broker cannot clear in
    # time shows as a longer step, i.e. a lower achieved rate.
    undelivered = producer.flush(max(5.0, 2 * command.seconds))
    total_s = time.perf_counter() - start
    if undelivered:
        producer.flush(SETTLE_S)  # not measured: only so that the next step starts clean
    return StepReport(index, command.step, sent, acked[0], undelivered, total_s, hist, errors[:3])


def _paced_sends(producer: Producer, topic: str, body: bytearray, command: Step, target: int, start: float,
                 measured: Callable[[Any, Any], None], warming: Callable[[Any, Any], None]) -> int:
    """Send ``target`` records at ``command.rate``; a producer that falls behind stops at the
    step's end plus a fifth (what it could not send counts against the achieved rate)."""
    rate, sent = command.rate, 0
    give_up = command.seconds * 1.2 + 0.5
    while sent < target:
        elapsed = time.perf_counter() - start
        if elapsed > give_up:
            break
        due = min(target, int(elapsed * rate) + 1)
        if sent >= due:
            # At least half a millisecond: waking for every single record at low rates would
            # spend the CPU the brokers need.
            time.sleep(max(0.0005, sent / rate - elapsed))
            continue
        warm = elapsed < command.warmup_s
        step, callback = (command.warm_step, warming) if warm else (command.step, measured)
        while sent < due:
            HEADER.pack_into(body, 0, time.time_ns(), step)
            try:
                producer.produce(topic, value=bytes(body), on_delivery=callback)
            except BufferError:
                producer.poll(0.001)
                continue
            sent += 1
        producer.poll(0)
    return sent


# --- the harness side --------------------------------------------------------------------------


@dataclass
class Outcome:
    """One step of all producers and consumers together."""

    offered_mb_s: float
    achieved_mb_s: float
    acked: int
    received: int
    undelivered: int
    publish: Histogram
    e2e: Histogram

    def sustained(self, latency_limit_ms: float) -> bool:
        return (self.achieved_mb_s >= (1 - SHORTFALL) * self.offered_mb_s and self.undelivered == 0
                and self.received >= self.acked and self.e2e.percentile_ms(0.99) <= latency_limit_ms)


class Clients:
    """``count`` producer and ``count`` consumer processes on one topic, for the steps of one
    workload run. The consumers split the partitions between them; every producer writes to
    all of them (librdkafka's partitioner, records without keys)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, count: int, size: int) -> None:
        self.size = size
        self.count = count
        ctx = multiprocessing.get_context("spawn")
        self._stop = ctx.Event()
        self._from_consumers: Any = ctx.Queue()
        self._from_producers: Any = ctx.Queue()
        self._commands = [ctx.Queue() for _ in range(count)]
        slices = [list(range(i, partitions, count)) for i in range(count)]
        self._consumers = [ctx.Process(target=_consumer_main, name=f"omb-consumer-{i}", daemon=True,
                                       args=(bootstrap, topic, slices[i], i, self._stop, self._from_consumers))
                           for i in range(count)]
        self._producers = [ctx.Process(target=_producer_main, name=f"omb-producer-{i}", daemon=True,
                                       args=(bootstrap, topic, partitions, size, i, self._commands[i],
                                             self._from_producers))
                           for i in range(count)]
        self._e2e: dict[int, Histogram] = {}
        self._next_step = 0

    def __enter__(self) -> Clients:
        for process in self._consumers + self._producers:
            process.start()
        try:
            self._wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        for source, what in ((self._from_producers, "producers"), (self._from_consumers, "consumers")):
            ready: set[int] = set()
            while len(ready) < self.count:
                self._check_alive()
                try:
                    message = source.get(timeout=0.5)
                except queue.Empty:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"only {len(ready)} of {self.count} {what} ready") from None
                    continue
                if message[0] == "ready":
                    ready.add(message[1])

    def _check_alive(self) -> None:
        for process in self._consumers + self._producers:
            if process.exitcode not in (None, 0):
                raise RuntimeError(f"{process.name} exited with {process.exitcode}")

    def close(self) -> None:
        for commands in self._commands:
            commands.put(None)
        self._stop.set()
        deadline = time.monotonic() + 40
        processes = self._producers + self._consumers
        while any(p.is_alive() for p in processes) and time.monotonic() < deadline:
            # A process exits only once what it has put on a queue is in the pipe; reading the
            # rest (latencies nobody needs any more) keeps a full pipe from holding it.
            for source in (self._from_consumers, self._from_producers):
                with contextlib.suppress(queue.Empty):
                    while True:
                        source.get_nowait()
            time.sleep(0.05)
        for process in processes:
            if process.is_alive():
                process.kill()
            process.join(5)

    def step(self, rate_mb: float, seconds: float, warmup_s: float = 0.0) -> Outcome:
        """All producers offer ``rate_mb`` together for ``seconds``; records of the first
        ``warmup_s`` count for the achieved rate but not for the latencies."""
        warm_id, step_id = self._next_step, self._next_step + 1
        self._next_step += 2
        rate = rate_mb * 1e6 / self.size / self.count
        start_at = time.time() + 0.2  # every producer begins at once, after its command arrives
        for commands in self._commands:
            commands.put(Step(step_id, warm_id, rate, seconds, warmup_s, start_at))
        reports = self._producer_reports(step_id, timeout=seconds * 4 + 120)
        acked = sum(r.acked for r in reports)
        received = self._await_consumers((warm_id, step_id), acked, CATCH_UP_S)
        publish = Histogram()
        for report in reports:
            publish.merge(report.publish)
        duration = max(r.total_s for r in reports)
        outcome = Outcome(
            offered_mb_s=rate_mb, achieved_mb_s=acked * self.size / 1e6 / duration, acked=acked,
            received=received, undelivered=sum(r.undelivered for r in reports), publish=publish,
            e2e=self._e2e.get(step_id, Histogram()),
        )
        if received < acked:  # a backlog: let it clear before the next step (unmeasured)
            self._await_consumers((warm_id, step_id), acked, SETTLE_S)
        return outcome

    def _producer_reports(self, step_id: int, timeout: float) -> list[StepReport]:
        reports: list[StepReport] = []
        deadline = time.monotonic() + timeout
        while len(reports) < self.count:
            self._check_alive()
            try:
                kind, report = self._from_producers.get(timeout=0.5)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{len(reports)} of {self.count} producers finished step {step_id}") from None
                continue
            if kind == "step" and report.step == step_id:
                if report.errors:
                    raise RuntimeError(f"producer {report.producer}: {report.errors}")
                reports.append(report)
        return reports

    def _await_consumers(self, steps: tuple[int, ...], expected: int, timeout: float) -> int:
        """Merge the consumers' latencies until they have ``expected`` records of ``steps``."""
        deadline = time.monotonic() + timeout
        while (received := sum(self._e2e[s].total for s in steps if s in self._e2e)) < expected:
            if time.monotonic() > deadline:
                break
            try:
                message = self._from_consumers.get(timeout=0.2)
            except queue.Empty:
                self._check_alive()
                continue
            if message[0] == "latencies":
                for step, hist in message[2].items():
                    self._e2e.setdefault(step, Histogram()).merge(hist)
        return received


def fixed_rate(clients: Clients, rate_mb: float, seconds: float) -> dict[str, float]:
    """One step at ``rate_mb`` with a warm-up quarter (connections, page cache, Kafka's JIT)."""
    outcome = clients.step(rate_mb, seconds, warmup_s=seconds / 4)
    if outcome.received < outcome.acked or outcome.undelivered:
        raise RuntimeError(f"fixed rate: {outcome.acked} acknowledged, {outcome.undelivered} undelivered, "
                           f"{outcome.received} consumed")
    return {**percentiles("pub", outcome.publish), **percentiles("e2e", outcome.e2e),
            "fixed_mb_s": outcome.achieved_mb_s, "fixed_records": float(outcome.acked)}


@dataclass(frozen=True)
class Search:
    start_mb: float
    factor: float
    steps: int
    step_s: float
    latency_limit_ms: float


def max_rate(clients: Clients, search: Search, label: str) -> dict[str, float]:
    """Offer ``start_mb``, then ``factor`` times more each step until a step is not sustained
    (it delivers less than 95% of what it offered, leaves records unconsumed, or its end-to-end
    p99 is above the limit), then halve the gap (geometric mean) between the best sustained and
    the first failed rate while steps remain. The result: the achieved MB/s of the best
    sustained step (0 if none was)."""
    best_offered: float | None = None
    failed: float | None = None
    best_achieved = 0.0
    rate = search.start_mb
    steps = 0
    for steps in range(1, search.steps + 1):
        outcome = clients.step(rate, search.step_s)
        ok = outcome.sustained(search.latency_limit_ms)
        log(f"  {label} max-rate step {steps}: offered {rate:.1f} MB/s, achieved {outcome.achieved_mb_s:.1f}, "
            f"e2e p99 {outcome.e2e.percentile_ms(0.99):.1f} ms -> {'sustained' if ok else 'not sustained'}")
        if ok:
            best_offered, best_achieved = rate, max(best_achieved, outcome.achieved_mb_s)
        else:
            failed = rate
        if failed is None:
            rate *= search.factor
        elif best_offered is None:
            rate /= search.factor
        elif failed / best_offered < 1.1:
            break  # close enough: another step would refine by less than 10%
        else:
            rate = math.sqrt(best_offered * failed)
    return {"max_mb_s": best_achieved, "max_offered_mb_s": best_offered or 0.0, "search_steps": float(steps)}
