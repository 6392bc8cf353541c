"""W4: end-to-end latency at a fixed offered rate.

A paced producer writes the wall-clock send time into the first 8 bytes of every record; a
consumer in a separate process (its own interpreter, so the producer's Python loop and GIL do not
delay it) computes receive time minus send time. Both run on this machine, so one clock serves
both ends. The first ``warmup`` fraction of the run (a quarter) is left out: connections, page
cache, and the JVM's JIT compiling Kafka's hot paths during its first seconds.
"""

from __future__ import annotations

import multiprocessing
import struct
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from harness.clients import CONSUMER_BASE, PRODUCER_BASE, payload

STAMP = struct.Struct(">q")
PROBE_STAMP = 0
# Latency favours small batches; 1 ms lets librdkafka group the records of one pacing tick.
LINGER_MS = 1


def _consume(bootstrap: str, topic: str, partitions: int, expected: int, skip_before_ns: Any,
             timeout: float, out: Any) -> None:
    consumer = Consumer({**CONSUMER_BASE, "bootstrap.servers": bootstrap})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    # Ready only once a probe record has come through: assign() returns before the fetcher has
    # found the leader and started fetching, and that start-up must not count as latency.
    deadline = time.monotonic() + 60
    while not any(m.error() is None for m in consumer.consume(10, 0.1)):
        if time.monotonic() > deadline:
            out.put("no probe")
            return
    out.put("ready")
    latencies: list[int] = []
    seen = 0
    deadline = time.monotonic() + timeout
    skip_before = 0
    while seen < expected and time.monotonic() < deadline:
        # poll(), not consume(n, timeout): consume waits for n records or the timeout, which at
        # low rates would add up to the timeout to every record's latency.
        msg = consumer.poll(0.5)
        now = time.time_ns()
        value = None if msg is None or msg.error() is not None else msg.value()
        if value is None:
            continue
        sent = STAMP.unpack_from(value)[0]
        if sent == PROBE_STAMP:  # the readiness probe, if it comes again
            continue
        if seen == 0:
            # Set by the producer side before its first send (a shared value).
            skip_before = skip_before_ns.value
        seen += 1
        if sent >= skip_before:
            latencies.append(now - sent)
    consumer.close()
    out.put((seen, latencies))


def _percentile(sorted_ns: list[int], q: float) -> float:
    index = min(len(sorted_ns) - 1, int(q * len(sorted_ns)))
    return sorted_ns[index] / 1e6


def measure(bootstrap: str, topic: str, partitions: int, *, rate_mb: float, seconds: float, size: int,
            warmup: float = 0.25) -> dict[str, float]:
    rate = rate_mb * 1e6 / size  # records per second
    expected = int(rate * seconds)
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    skip_before = ctx.Value("q", 0)
    reader = ctx.Process(target=_consume, args=(bootstrap, topic, partitions, expected, skip_before,
                                                seconds + 120, results))
    reader.start()
    try:
        _send_probe(bootstrap, topic)
        if results.get(timeout=90) != "ready":
            raise RuntimeError("latency consumer did not start")
        # The warm-up window begins when sending does.
        skip_before.value = time.time_ns() + int(warmup * seconds * 1e9)
        achieved = _paced_produce(bootstrap, topic, expected, rate, size)
        seen, latencies = results.get(timeout=seconds + 180)
    finally:
        reader.join(30)
        if reader.is_alive():
            reader.kill()
    if seen < expected or not latencies:
        raise RuntimeError(f"latency consumer saw {seen} of {expected} records")
    latencies.sort()
    return {
        "p50_ms": _percentile(latencies, 0.50),
        "p99_ms": _percentile(latencies, 0.99),
        "p999_ms": _percentile(latencies, 0.999),
        "offered_mb_s": achieved * size / 1e6,
    }


def _send_probe(bootstrap: str, topic: str) -> None:
    producer = Producer({**PRODUCER_BASE, "bootstrap.servers": bootstrap, "acks": "1"})
    producer.produce(topic, value=STAMP.pack(PROBE_STAMP), partition=0)
    if producer.flush(30):
        raise RuntimeError("latency probe not delivered")


def _paced_produce(bootstrap: str, topic: str, count: int, rate: float, size: int) -> float:
    """Send ``count`` records at ``rate`` per second; returns the rate actually achieved."""
    producer = Producer({**PRODUCER_BASE, "bootstrap.servers": bootstrap, "acks": "1", "linger.ms": LINGER_MS})
    body = bytearray(payload(size))
    start = time.perf_counter()
    sent = 0
    while sent < count:
        due = min(count, int((time.perf_counter() - start) * rate) + 1)
        if sent >= due:
            time.sleep(0.0002)
            continue
        while sent < due:
            STAMP.pack_into(body, 0, time.time_ns())
            try:
                producer.produce(topic, value=bytes(body))
            except BufferError:
                producer.poll(0.001)
                continue
            sent += 1
        producer.poll(0)
    elapsed = time.perf_counter() - start
    if producer.flush(120):
        raise RuntimeError("latency producer: records undelivered")
    return sent / elapsed
