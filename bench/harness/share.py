"""S1 (issue #21, acceptance 5): share-group throughput, records acknowledged per second.

Java's ``KafkaShareConsumer`` (``tests/java/ShareThroughput.java``, one JVM, one consumer per
thread) consumes with implicit acknowledgement, as Kafka's ShareConsumerPerformance does. A
share group starts at the log end (``share.auto.offset.reset`` latest), so the harness first
produces warm-up records until every partition has delivered one, pauses the consumers, produces
the measured records with librdkafka, and resumes them: they read a backlog. The clock runs from
the first measured record a consumer got to the last consumer's ``commitSync`` (every
acknowledgement is then with the broker): records over that time, the consumers' and their
broker's rate.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from support.java_programs import JavaPrograms, JavaSession

from harness import clients
from harness.systems import kafka_libs

MAIN_CLASS = "ShareThroughput"
WARM_UP_S = 90.0
HEAP = "768m"


class ShareThroughputError(RuntimeError):
    """The share consumers failed or fell short; the message has their answer."""


def _warm_up(session: JavaSession, bootstrap: str, topic: str, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    deadline = time.monotonic() + WARM_UP_S
    round_ = 0
    while True:
        for p in range(partitions):
            producer.produce(topic, f"warm-{round_}-{p}".encode(), partition=p)
        producer.flush(30)
        time.sleep(0.5)
        answer = session.call("warm")
        if answer.get("failure"):
            raise ShareThroughputError(f"a share consumer failed during the warm-up: {answer}")
        if sorted(answer["partitions"]) == list(range(partitions)):
            return
        if time.monotonic() > deadline:
            raise ShareThroughputError(f"warm-up records seen only from partitions {answer['partitions']}")
        round_ += 1


def share_throughput(bootstrap: str, topic: str, partitions: int, records: int, size: int,
                     consumers: int, timeout_s: float = 600.0) -> tuple[float, float]:
    """(records acknowledged per second, seconds) of ``consumers`` share consumers reading
    ``records`` records of ``size`` bytes from ``topic``."""
    programs = JavaPrograms(kafka_libs(), heap=HEAP)
    log = Path(tempfile.mkdtemp(prefix="share-throughput-")) / "java.log"
    session = programs.session(MAIN_CLASS, [bootstrap], log_path=log)
    try:
        session.call("start", f"s1-{uuid.uuid4().hex[:8]}", topic, consumers)
        _warm_up(session, bootstrap, topic, partitions)
        # The consumers read a backlog: paused while the records are written, then timed.
        session.call("pause")
        clients.produce(bootstrap, topic, records, size, linger_ms=5, acks="1")
        session.call("resume")
        answer = session.call("wait", records, int(timeout_s * 1000), timeout=timeout_s + 60, expect_ok=False)
        if not answer.get("ok"):
            raise ShareThroughputError(f"share consumers: {answer}; log {log}")
        seconds = float(answer["seconds"])
        return answer["records"] / seconds, seconds
    finally:
        session.call("stop", timeout=90, expect_ok=False)
        session.close()
