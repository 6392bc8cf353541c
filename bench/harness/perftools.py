"""Kafka's own perf tools (org.apache.kafka.tools.ProducerPerformance / ConsumerPerformance),
run with ``java -cp '<libs>/*'`` against either system: the Java client's view, next to
librdkafka's."""

from __future__ import annotations

import re
import subprocess
import uuid
from pathlib import Path

from support.brokers import kafka_dist

from harness.systems import kafka_libs

TOOL_HEAP = "512m"
_SENT = re.compile(r"(\d+) records sent, ([\d.]+) records/sec")


def _run(main_class: str, args: list[str], timeout: float) -> str:
    cmd = kafka_dist.java_command(kafka_libs(), main_class, args, heap=TOOL_HEAP)
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(
            f"{main_class} exited {result.returncode}:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
        )
    return result.stdout


def producer_perf(bootstrap: str, topic: str, records: int, size: int, *, linger_ms: int, acks: str,
                  timeout: float = 900.0, command_config: Path | None = None) -> float:
    """Records/s that ProducerPerformance reports for its whole run (unthrottled);
    ``command_config`` is a client properties file (TLS and SASL for a secured listener)."""
    extra = ["--command-config", str(command_config)] if command_config else []
    out = _run(kafka_dist.PRODUCER_PERF_MAIN, [*extra,
        "--topic", topic, "--num-records", str(records), "--record-size", str(size), "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={bootstrap}", f"acks={acks}", f"linger.ms={linger_ms}",
        "batch.size=1048576", "compression.type=none",
    ], timeout)
    # It prints a progress line every 5 s and the totals last; the last match is the summary.
    matches = _SENT.findall(out)
    if not matches:
        raise RuntimeError(f"no summary in ProducerPerformance output:\n{out[-2000:]}")
    sent, rate = matches[-1]
    if int(sent) != records:
        raise RuntimeError(f"ProducerPerformance sent {sent} of {records}")
    return float(rate)


def consumer_perf(bootstrap: str, topic: str, records: int, timeout: float = 900.0,
                  command_config: Path | None = None) -> float:
    """Records/s of ConsumerPerformance's fetch phase (``fetch.nMsg.sec``: its group join and
    rebalance time left out, so the number is the fetch path's)."""
    extra = ["--command-config", str(command_config)] if command_config else []
    out = _run(kafka_dist.CONSUMER_PERF_MAIN, [*extra,
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records),
        "--group", f"perf-{uuid.uuid4().hex[:8]}", "--timeout", "60000",
    ], timeout)
    lines = [line for line in out.splitlines() if line.strip()]
    header_at = next((i for i, line in enumerate(lines) if line.startswith("start.time")), None)
    if header_at is None or header_at + 1 >= len(lines):
        raise RuntimeError(f"no table in ConsumerPerformance output:\n{out[-2000:]}")
    names = [n.strip() for n in lines[header_at].split(",")]
    values = [v.strip() for v in lines[header_at + 1].split(",")]
    row = dict(zip(names, values, strict=False))
    consumed = int(float(row["data.consumed.in.nMsg"]))
    if consumed < records:
        raise RuntimeError(f"ConsumerPerformance read {consumed} of {records}")
    return float(row["fetch.nMsg.sec"])
