"""Malformed input: 100,000 seeded mutated requests against a live broker.

Oracle per request: the broker answers, or closes the connection, or stays silent only where
silence is legitimate (the frame is still incomplete, or it decodes as a valid request that may
wait or need no answer). Throughout, a well-behaved client keeps being served, and the broker's
memory stays bounded.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from support.fuzz import FuzzCase, cases, may_stay_unanswered
from support.process_control import rss_kib

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

CASES = int(os.environ.get("RIVERLOG_FUZZ_CASES", "100000"))
MAX_FRAME = 1 << 20
WORKERS = 8
SILENCE_S = 1.0
TOPIC = "fuzz-target"


class Outcomes:
    def __init__(self) -> None:
        self.by_kind: Counter[tuple[str, str]] = Counter()
        self.violations: list[tuple[str, str, bytes]] = []


async def run_worker(host: str, port: int, work: list[FuzzCase], out: Outcomes) -> None:
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    for case in work:
        if writer is None or writer.is_closing():
            reader, writer = await asyncio.open_connection(host, port)
        assert reader is not None
        try:
            writer.write(case.frame)
            await writer.drain()
            head = await asyncio.wait_for(reader.readexactly(4), SILENCE_S)
            size = int.from_bytes(head, "big", signed=True)
            await asyncio.wait_for(reader.readexactly(size), SILENCE_S)
            outcome = "answered"
        except (asyncio.IncompleteReadError, ConnectionError):
            outcome = "closed"
        except TimeoutError:
            outcome = "silent"
        out.by_kind[(case.kind, outcome)] += 1
        if outcome == "silent" and case.kind != "wrong-size" and not may_stay_unanswered(case.frame):
            out.violations.append((case.kind, outcome, case.frame[:64]))
        if outcome != "answered" or case.kind in ("wrong-size", "truncated", "unknown-api"):
            # After silence or a lying frame the stream position is unknown: start afresh.
            writer.close()
            writer = None
    if writer is not None:
        writer.close()


def client_round_trip(bootstrap: str, n: int) -> None:
    """A well-behaved client is still served: produce one record and read it back."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    value = f"healthy-{n}".encode()
    producer.produce(TOPIC, value=value, partition=0)
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fuzz-checker",
                         "enable.auto.commit": False})
    try:
        watermarks = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        consumer.assign([TopicPartition(TOPIC, 0, watermarks[1] - 1)])
        msg = consumer.poll(10)
        assert msg is not None and msg.error() is None and msg.value() == value
    finally:
        consumer.close()


def test_broker_survives_100k_mutated_requests(broker_factory) -> None:
    broker = broker_factory(overrides={"socket.request.max.bytes": str(MAX_FRAME)})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(15)
    host, port = broker.bootstrap.rsplit(":", 1)
    all_cases = list(cases(seed=20261121, count=CASES, topic=TOPIC, max_frame=MAX_FRAME))
    assert len(all_cases) == CASES
    client_round_trip(broker.bootstrap, 0)
    baseline = rss_kib(broker.pid)
    out = Outcomes()
    chunk = 5000
    peak = baseline
    for start in range(0, len(all_cases), chunk):
        part = all_cases[start : start + chunk]

        async def run(part: list[FuzzCase] = part) -> None:
            await asyncio.gather(*(run_worker(host, int(port), part[i::WORKERS], out) for i in range(WORKERS)))

        asyncio.run(run())
        broker.assert_alive()
        peak = max(peak, rss_kib(broker.pid))
        if (start // chunk) % 5 == 0:
            client_round_trip(broker.bootstrap, start)
    client_round_trip(broker.bootstrap, CASES)
    summary = "\n".join(f"{k[0]:>14} {k[1]:>9}: {v}" for k, v in sorted(out.by_kind.items()))
    print(f"fuzz outcomes:\n{summary}\nRSS baseline {baseline} KiB, peak {peak} KiB")
    assert sum(out.by_kind.values()) == CASES
    assert not out.violations, f"requests left unanswered without reason: {out.violations[:5]}"
    # Every kind of mutation was exercised and malformed input was refused somehow.
    kinds = {k for k, _ in out.by_kind}
    assert kinds >= {"bitflip", "truncated", "wrong-size", "unknown-api", "garbage-body", "oversized",
                     "bad-topic", "overwrite"}
    assert out.by_kind[("oversized", "closed")] == sum(v for (k, _), v in out.by_kind.items() if k == "oversized")
    # Memory stays bounded: 100k hostile requests may not grow the broker by more than 150 MiB.
    assert peak - baseline < 150 * 1024, f"RSS grew from {baseline} to {peak} KiB"
