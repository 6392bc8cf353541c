"""The streaming ETL's expected output, computed independently of Spark: shared by the ETL's
tests of JSON and of Avro values.

Tumbling windows [k*W, (k+1)*W) of epoch milliseconds; in append mode a window is written once
the watermark (largest event time seen minus the delay) has reached its end.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from support.brokers import BrokerProcess
from support.spark_run import Record, as_json, create_topic, riverlog_spark

WINDOW_MS = 10_000
WATERMARK_MS = 5_000
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
STEP_MS = 200
JITTER_MS = 1_500


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def expected_aggregates(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """key -> value of every window the watermark has closed, by plain Python."""
    watermark = max(e["ts"] for e in events) - WATERMARK_MS
    counts: dict[tuple[int, str], int] = defaultdict(int)
    sums: dict[tuple[int, str], Decimal] = defaultdict(Decimal)
    for e in events:
        slot = (e["ts"] // WINDOW_MS * WINDOW_MS, e["category"])
        counts[slot] += 1
        sums[slot] += e["amount"]
    # Windows ending within a millisecond of the watermark would make the test depend on Spark's
    # choice of < or <=; the seeded data keeps clear of that.
    assert all(abs(first + WINDOW_MS - watermark) > 1 for first, _ in counts)
    out = {}
    for (first, category), count in counts.items():
        if first + WINDOW_MS <= watermark:
            out[f"{iso(first)}|{category}"] = {
                "window_start": iso(first), "window_end": iso(first + WINDOW_MS),
                "category": category, "events": count, "amount": sums[(first, category)],
            }
    return out


def output_by_key(records: list[Record]) -> dict[str, list[dict[str, Any]]]:
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        assert r.key is not None
        by_key[r.key.decode()].append(as_json(r.value))
    return by_key


def etl_command(broker: BrokerProcess, tag: str, checkpoint: Path, *extra: str) -> list[str]:
    return riverlog_spark(
        "run", "etl", "--bootstrap", broker.bootstrap, "--input-topic", f"{tag}-events",
        "--output-topic", f"{tag}-aggregates", "--checkpoint", str(checkpoint),
        "--window", f"{WINDOW_MS // 1000} seconds", "--watermark", f"{WATERMARK_MS // 1000} seconds", *extra,
    )


def setup_topics(broker: BrokerProcess, tag: str) -> None:
    create_topic(broker.bootstrap, f"{tag}-events", 2)
    create_topic(broker.bootstrap, f"{tag}-aggregates", 2, {"cleanup.policy": "compact"})
