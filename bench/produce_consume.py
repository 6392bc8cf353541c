"""First throughput benchmark: confluent-kafka producing and consuming 1 KiB records.

Starts a fresh broker (Riverlog, or Apache Kafka from Maven Central jars with ``--target kafka``,
or both in turn with ``--target both``), produces N records of 1 KiB in batches (linger 5 ms,
acks=1), then consumes them all back from the beginning, and prints records/s and MB/s for each
phase. ``--json FILE`` writes the numbers. Goals and results live in docs/benchmarks.md.

    .venv/bin/python bench/produce_consume.py --records 200000 --target both
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "broker_image"))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from support.brokers import BrokerProcess  # noqa: E402

RECORD_SIZE = 1024
PARTITIONS = 8


def machine() -> str:
    cpu = "unknown cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({cpu}), {mem_gib:.0f} GiB, {platform.system()} {platform.release()}"


def produce(bootstrap: str, topic: str, count: int, compression: str) -> float:
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "batch.size": 1 << 20,
        "compression.type": compression, "queue.buffering.max.messages": 500_000,
        "queue.buffering.max.kbytes": 1 << 20,
    })
    payload = os.urandom(RECORD_SIZE // 2).hex().encode()
    errors: list[str] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    start = time.perf_counter()
    last_report = start
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=payload, key=str(i % 1000).encode(), on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
            now = time.perf_counter()
            if now - last_report > 1:
                print(f"  produced {i:,}/{count:,}", file=sys.stderr)
                last_report = now
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    if remaining or errors:
        raise RuntimeError(f"{remaining} undelivered, errors: {errors[:3]}")
    return elapsed


def consume(bootstrap: str, topic: str, count: int) -> float:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
        "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 8 << 20,
    })
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen = 0
    start = time.perf_counter()
    deadline = start + 300
    while seen < count and time.perf_counter() < deadline:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                seen += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    if seen < count:
        raise RuntimeError(f"consumed only {seen} of {count}")
    return elapsed


def run_one(target: str, records: int, compression: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"bench-{target}-") as tmp:
        broker = BrokerProcess(Path(tmp), target=target, overrides={"num.partitions": PARTITIONS})
        broker.start(timeout=120)
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic("bench", PARTITIONS, 1)])["bench"].result(30)
            print(f"{target}: producing {records:,} records of {RECORD_SIZE} B", file=sys.stderr)
            produce_s = produce(broker.bootstrap, "bench", records, compression)
            print(f"{target}: consuming", file=sys.stderr)
            consume_s = consume(broker.bootstrap, "bench", records)
        finally:
            broker.close()
    mb = records * RECORD_SIZE / 1e6
    return {
        "target": target, "records": records, "record_bytes": RECORD_SIZE, "compression": compression,
        "produce_s": round(produce_s, 3), "produce_records_per_s": round(records / produce_s),
        "produce_mb_per_s": round(mb / produce_s, 1),
        "consume_s": round(consume_s, 3), "consume_records_per_s": round(records / consume_s),
        "consume_mb_per_s": round(mb / consume_s, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--target", choices=["riverlog", "kafka", "both"], default="riverlog")
    parser.add_argument("--compression", default="none")
    parser.add_argument("--json", type=Path, help="write results here")
    args = parser.parse_args()
    targets = ["riverlog", "kafka"] if args.target == "both" else [args.target]
    results = [run_one(t, args.records, args.compression) for t in targets]
    print(f"\nmachine: {machine()}")
    print(f"{'target':<10} {'produce rec/s':>14} {'produce MB/s':>13} {'consume rec/s':>14} {'consume MB/s':>13}")
    for r in results:
        print(f"{r['target']:<10} {r['produce_records_per_s']:>14,} {r['produce_mb_per_s']:>13} "
              f"{r['consume_records_per_s']:>14,} {r['consume_mb_per_s']:>13}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
