"""Clients that misbehave on purpose never hold up the others (issue #14, acceptance 1).

One broker, two 20 s runs of an ordinary confluent-kafka producer (acks=all, a record every
10 ms) followed by a consumer reading everything back: first alone, then next to

* 8 connections that pipeline Fetch requests for 1 MiB each and never read a response, and
* 50 connections that each declare a request of about 100 MB and send only 4 MiB of it.

Asserted: both runs complete with every record acknowledged and read back, the broker stays up,
and its resident memory grows by less than ``queued.max.request.bytes`` (the request memory pool
both systems bound half-sent requests with) plus ``MEMORY_SLACK_MB``. Reported, not asserted
(timings are for docs/benchmarks.md): the producer's p50/p99 acknowledgement latency in each
run.

Against Apache Kafka (RIVERLOG_TEST_TARGET=kafka) only the stalled readers run: Kafka 4.3.1
allocates a half-sent request's whole declared size from its pool as soon as the size arrives,
and once the pool is spent it stops reading from every connection, so the ordinary producer got
no acknowledgement at all within 60 s (observed with this module); with no pool
(``queued.max.request.bytes=-1``, its default) the 50 declared requests would ask its heap for
5 GB. Riverlog holds a half-sent request only as far as it has arrived and keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from riverlog.protocol.api_keys import ApiKey
from support.brokers import BrokerProcess
from support.fuzz import encode_request
from support.process_control import rss_kib

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

RUN_S = 20.0
SEND_EVERY_S = 0.01
STALLED_READERS = 8
HALF_SENT = 50
DECLARED_FRAME = 100_000_000
SENT_OF_FRAME = 4 << 20
# queued.max.request.bytes: both systems require it to hold at least one largest request
# (socket.request.max.bytes, 100 MiB by default).
POOL_BYTES = 100 << 20
MEMORY_SLACK_MB = 64  # buffers of the live connections, allocator slack
PREFILL_PARTITIONS = 4
PREFILL_BYTES_PER_PARTITION = 4 << 20


def rss_mb(pid: int) -> float:
    return rss_kib(pid) / 1024


@pytest.fixture(scope="module")
def broker(module_broker_factory) -> Iterator[BrokerProcess]:  # type: ignore[no-untyped-def]
    broker = module_broker_factory({"queued.max.request.bytes": POOL_BYTES,
                                    "socket.request.max.bytes": POOL_BYTES})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic("stalled", PREFILL_PARTITIONS, 1), NewTopic("ordinary", 1, 1)])
    for future in futures.values():
        future.result(30)
    # Data for the stalled readers' fetches, so every response they never read is large.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
    value = os.urandom(1000)
    for partition in range(PREFILL_PARTITIONS):
        for _ in range(PREFILL_BYTES_PER_PARTITION // len(value)):
            producer.produce("stalled", value=value, partition=partition)
            producer.poll(0)
    assert producer.flush(60) == 0
    yield broker


def ordinary_run(bootstrap: str, topic: str, tag: str) -> tuple[int, list[float]]:
    """Produce for RUN_S with acks=all, then read it all back; returns (records read, latencies)."""
    latencies: list[float] = []
    failures: list[str] = []

    def delivered(err: object, msg: object, sent: float) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            latencies.append(time.monotonic() - sent)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": True})
    sent = 0
    start = time.monotonic()
    while time.monotonic() - start < RUN_S:
        at = time.monotonic()
        producer.produce(topic, key=tag.encode(), value=b"%s-%d" % (tag.encode(), sent),
                         on_delivery=lambda err, msg, at=at: delivered(err, msg, at))
        sent += 1
        producer.poll(0)
        time.sleep(SEND_EVERY_S)
    assert producer.flush(60) == 0 and failures == [], failures[:3]
    assert len(latencies) == sent

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ordinary-{tag}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    read = 0
    deadline = time.monotonic() + 60
    while read < sent and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None and msg.key() == tag.encode():
            read += 1
    consumer.close()
    assert read == sent, f"{tag}: read {read} of {sent} acknowledged records"
    return read, latencies


async def stalled_reader(host: str, port: int, stop: asyncio.Event, index: int) -> None:
    """Pipeline 1 MiB Fetch requests and never read what comes back."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        correlation = 0
        while not stop.is_set():
            body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                    "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                    "topics": [{"topic": "stalled", "partitions": [
                        {"partition": index % PREFILL_PARTITIONS, "current_leader_epoch": -1, "fetch_offset": 0,
                         "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                    "forgotten_topics_data": [], "rack_id": ""}
            writer.write(encode_request(ApiKey.FETCH, 11, body, correlation, client_id=f"stalled-{index}"))
            correlation += 1
            # drain() blocks once the broker stops reading us: exactly the back-pressure wanted.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(writer.drain(), 1.0)
            await asyncio.sleep(0.01)
    except ConnectionError:
        pass  # the broker may give up on us; that is allowed
    finally:
        writer.transport.abort()
        del reader


async def half_sender(host: str, port: int, hold: asyncio.Event) -> None:
    """Declare a ~100 MB request, send 4 MiB of it, then wait."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(struct.pack(">i", DECLARED_FRAME))
        chunk = bytes(64 << 10)
        for _ in range(SENT_OF_FRAME // len(chunk)):
            writer.write(chunk)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(writer.drain(), 1.0)
        await hold.wait()
    except ConnectionError:
        pass
    finally:
        writer.transport.abort()
        del reader


def run_abusers(host: str, port: int, pid: int, half_sent: int, started: threading.Event, done: threading.Event,
                rss_samples: list[float]) -> None:
    async def main() -> None:
        stop = asyncio.Event()
        tasks = [asyncio.create_task(stalled_reader(host, port, stop, i)) for i in range(STALLED_READERS)]
        tasks += [asyncio.create_task(half_sender(host, port, stop)) for _ in range(half_sent)]
        await asyncio.sleep(3)  # let them fill their buffers before the ordinary run starts
        started.set()
        while not done.is_set():
            rss_samples.append(rss_mb(pid))
            await asyncio.sleep(0.2)
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) >= 2 else values[0]


def test_ordinary_clients_are_served_next_to_stalled_readers_and_half_sent_requests(broker: BrokerProcess) -> None:
    assert broker.pid is not None
    base_rss = rss_mb(broker.pid)
    alone_read, alone = ordinary_run(broker.bootstrap, "ordinary", "alone")

    started, done = threading.Event(), threading.Event()
    samples: list[float] = []
    half_sent = HALF_SENT if broker.target == "riverlog" else 0  # see the module's docstring
    abusers = threading.Thread(target=run_abusers, daemon=True,
                               args=(broker.host, broker.port, broker.pid, half_sent, started, done, samples))
    abusers.start()
    assert started.wait(60)
    try:
        beside_read, beside = ordinary_run(broker.bootstrap, "ordinary", "beside")
    finally:
        done.set()
        abusers.join(60)
    peak_rss = max(samples)
    broker.assert_alive()
    print(f"\n[{broker.target}] alone: {alone_read} records, ack p50 {percentile(alone, 50) * 1000:.1f} ms "
          f"p99 {percentile(alone, 99) * 1000:.1f} ms; beside {STALLED_READERS} stalled readers and {half_sent} "
          f"half-sent requests: {beside_read} records, ack p50 {percentile(beside, 50) * 1000:.1f} ms "
          f"p99 {percentile(beside, 99) * 1000:.1f} ms; RSS {base_rss:.0f} MB -> peak {peak_rss:.0f} MB")
    bound = POOL_BYTES / (1 << 20) + MEMORY_SLACK_MB
    assert peak_rss - base_rss < bound, f"memory grew by {peak_rss - base_rss:.0f} MB (bound {bound:.0f} MB)"
