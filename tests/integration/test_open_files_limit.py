"""A broker short of file descriptors says so and keeps serving what it could open.

Riverlog's own behaviour, so this runs against Riverlog only (Kafka treats a "Too many open
files" like a disk error and takes the whole log directory offline). The broker starts under
``prlimit`` with a soft limit below a small hard limit:

- it raises the soft limit to the hard one, as the JVM does for Kafka;
- a topic with more partitions than the hard limit allows opens what it can; the rest answer
  KAFKA_STORAGE_ERROR and the log tells the operator the fix, while the log directory stays
  online and the open partitions take writes;
- restarted without the limit, every partition takes a write (nothing was damaged).
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from support.brokers import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SOFT, HARD = 64, 160
PARTITIONS = 200  # an idle partition holds one descriptor: more than HARD allows
KAFKA_STORAGE_ERROR = 56


def open_files_limit(pid: int) -> tuple[int, int]:
    with open(f"/proc/{pid}/limits") as f:
        line = next(line for line in f if line.startswith("Max open files"))
    soft, hard = line.split()[3:5]
    return int(soft), int(hard)


def produce_one(producer: Producer, topic: str, partition: int) -> KafkaError | None:
    outcome: list[KafkaError | None] = []
    producer.produce(topic, b"v", partition=partition, on_delivery=lambda err, _msg: outcome.append(err))
    assert producer.flush(30) == 0
    return outcome[0]


def test_partitions_beyond_the_open_files_limit(broker_factory, broker_target) -> None:
    if broker_target != "riverlog":
        pytest.fail("this checks Riverlog's own handling of the open-files limit; run it against Riverlog")
    broker: BrokerProcess = broker_factory(start=False)
    plain_command = broker.command
    broker.command = lambda: ["prlimit", f"--nofile={SOFT}:{HARD}", *plain_command()]  # type: ignore[method-assign]
    broker.start()
    assert broker.pid is not None
    assert open_files_limit(broker.pid) == (HARD, HARD)

    # Connections first: once the broker is out of descriptors it cannot accept new ones.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0, "enable.idempotence": False,
                         "acks": 1, "linger.ms": 0})
    admin.create_topics([NewTopic("warm", 1, 1)])["warm"].result(30)
    assert produce_one(producer, "warm", 0) is None
    admin.create_topics([NewTopic("many", PARTITIONS, 1)])["many"].result(60)

    assert produce_one(producer, "many", 0) is None
    refused = produce_one(producer, "many", PARTITIONS - 1)
    assert refused is not None and refused.code() == KAFKA_STORAGE_ERROR, refused
    log_text = broker.log_path.read_text()
    assert "many-199 is unavailable on this broker: Too many open files" in log_text
    assert "Raise the open-files limit" in log_text
    assert "is offline after a disk error" not in log_text
    producer.flush(5)

    broker.command = plain_command  # type: ignore[method-assign]
    broker.restart()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 5})
    failures: list[str] = []
    for p in range(PARTITIONS):
        producer.produce("many", b"v", partition=p,
                         on_delivery=lambda err, msg: failures.append(f"{msg.partition()}: {err}") if err else None)
    assert producer.flush(60) == 0
    assert failures == []
