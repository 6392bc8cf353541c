"""Helpers of the spark tier: run ``riverlog-spark`` as a process, and read/write topics with an
independent client (librdkafka through confluent-kafka), so expected results never come from the
code under test.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[2]
PIPELINE_TIMEOUT = 420.0


def spark_env() -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(REPO_ROOT / "spark"), str(REPO_ROOT / "broker_image")]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    # Spark's driver and block manager stay on loopback (the session sets the same for local
    # masters; spark-submit runs read it from here).
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PYSPARK_PYTHON"] = sys.executable
    return env


def riverlog_spark(*args: str) -> list[str]:
    return [sys.executable, "-m", "riverlog_spark", *args]


class PipelineError(AssertionError):
    pass


def run(cmd: Sequence[str], log_path: Path, *, cwd: Path, timeout: float = PIPELINE_TIMEOUT) -> str:
    """Run to completion; the output goes to ``log_path`` and is returned. Fails with its tail."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(list(cmd), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=cwd, env=spark_env(), start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            raise PipelineError(f"{cmd[:5]} still running after {timeout:.0f} s\n{tail(log_path)}") from None
    output = log_path.read_text(errors="replace")
    if code != 0:
        raise PipelineError(f"{' '.join(cmd[:6])} exited with {code}\n{tail(log_path)}")
    return output


def start(cmd: Sequence[str], log_path: Path, *, cwd: Path) -> subprocess.Popen[bytes]:
    """Start in its own process group (the Python driver and its JVM), for kill_group()."""
    log = open(log_path, "wb")  # noqa: SIM115 - the child keeps writing after we return
    try:
        return subprocess.Popen(list(cmd), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=cwd, env=spark_env(), start_new_session=True)
    finally:
        log.close()


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group this helper created (the driver and the JVM it started)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def tail(path: Path, lines: int = 60) -> str:
    text = path.read_text(errors="replace").splitlines() if path.exists() else []
    # Java stack frames say little here; the exception lines around them say what happened.
    text = [line for line in text if not line.lstrip().startswith("at ")]
    return f"--- last lines of {path} ---\n" + "\n".join(text[-lines:])


def wait_until(check: Any, timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not reached within {timeout:.0f} s (last: {value!r})")
        time.sleep(interval)


# --- topics through librdkafka ---------------------------------------------------------------


def create_topic(bootstrap: str, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})], operation_timeout=30)
    futures[name].result(timeout=60)


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


ToProduce = tuple[bytes | None, bytes | None, int | None, int | None]


def produce(bootstrap: str, topic: str, records: Sequence[ToProduce]) -> None:
    """(key, value, partition or None, timestamp ms or None) each, in order, acks=all."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    for key, value, partition, timestamp in records:
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": delivered}
        if partition is not None:
            kwargs["partition"] = partition
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        producer.produce(topic, **kwargs)
        producer.poll(0)
    remaining = producer.flush(60)
    assert remaining == 0 and not errors, f"produce to {topic}: {remaining} undelivered, errors {errors[:3]}"


def read_topic(bootstrap: str, topic: str, timeout: float = 60.0) -> list[Record]:
    """Every record of every partition, from the log start to the end as of the call."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = sorted(admin.list_topics(topic, timeout=30).topics[topic].partitions)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-tier-reader",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    out: list[Record] = []
    try:
        for partition in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, partition, low)])
            deadline = time.monotonic() + timeout
            position = low
            while position < high:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{topic}[{partition}]: read to {position}, end is {high}")
                for message in consumer.consume(500, timeout=1.0):
                    if message.error():
                        raise KafkaException(message.error())
                    out.append(Record(partition, message.offset(), message.timestamp()[1],
                                      message.key(), message.value()))
                    position = message.offset() + 1
    finally:
        consumer.close()
    return out


def as_json(value: bytes | None) -> dict[str, Any]:
    """A JSON value with decimals kept exact (amounts are compared with Decimal)."""
    assert value is not None
    parsed: dict[str, Any] = json.loads(value, parse_float=Decimal)
    return parsed
