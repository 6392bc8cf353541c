"""Acceptance 1 and 2: the streaming ETL's output topic holds exactly the windowed aggregates
computed here from the input topic, also after a kill -9 mid-stream and a restart from the
checkpoint; and the same while the broker is killed and restarted under the running pipeline.

The expected output follows Spark's event-time rules, computed independently: tumbling windows
[k*W, (k+1)*W) of epoch milliseconds; in append mode a window is written once the watermark
(largest event time seen minus the delay) has reached its end. The generated events are out of
order by less than the watermark delay, so no event is late and every one is counted.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from support.brokers import BrokerProcess
from support.spark_run import (
    as_json,
    kill_group,
    read_topic,
    riverlog_spark,
    run,
    start,
    tail,
    wait_until,
)
from support.spark_windows import (
    JITTER_MS,
    START_MS,
    STEP_MS,
    etl_command,
    expected_aggregates,
    output_by_key,
    setup_topics,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]


def generate(broker: BrokerProcess, topic: str, count: int, start_ms: int, seed: int, prefix: str,
             log: Path) -> str:
    return run(riverlog_spark(
        "generate", "--bootstrap", broker.bootstrap, "--topic", topic, "--count", str(count),
        "--start-ms", str(start_ms), "--step-ms", str(STEP_MS), "--jitter-ms", str(JITTER_MS),
        "--seed", str(seed), "--id-prefix", prefix, "--users", "15",
    ), log, cwd=log.parent)


def input_events(broker: BrokerProcess, topic: str) -> list[dict[str, Any]]:
    return [as_json(r.value) for r in read_topic(broker.bootstrap, topic)]


def test_streaming_aggregates_match_an_independent_computation(spark_broker: BrokerProcess, tmp_path: Path) -> None:
    setup_topics(spark_broker, "etl1")
    shown = generate(spark_broker, "etl1-events", 600, START_MS, 7, "a-", tmp_path / "generate.log")
    assert "600/600  100%" in shown  # the progress bar reached the end

    events = input_events(spark_broker, "etl1-events")
    assert len(events) == 600
    expected = expected_aggregates(events)
    assert len(expected) >= 40

    run(etl_command(spark_broker, "etl1", tmp_path / "checkpoint", "--trigger", "available-now"),
        tmp_path / "etl.log", cwd=tmp_path)

    by_key = output_by_key(read_topic(spark_broker.bootstrap, "etl1-aggregates"))
    # One run without failures: every closed window written exactly once, nothing else.
    assert {k: len(v) for k, v in by_key.items() if len(v) != 1} == {}
    assert {k: v[0] for k, v in by_key.items()} == expected


def test_killed_mid_stream_and_restarted_from_the_checkpoint(spark_broker: BrokerProcess, tmp_path: Path) -> None:
    setup_topics(spark_broker, "etl2")
    generate(spark_broker, "etl2-events", 1200, START_MS, 11, "b-", tmp_path / "generate1.log")
    checkpoint = tmp_path / "checkpoint"
    commits = checkpoint / "commits"

    def committed() -> int:
        return len([p for p in commits.glob("[0-9]*")]) if commits.is_dir() else 0

    # Small micro-batches on a short trigger: about ten batches, killed after the third.
    proc = start(etl_command(spark_broker, "etl2", checkpoint, "--trigger", "1 second",
                             "--max-offsets-per-trigger", "120"), tmp_path / "etl-first.log", cwd=tmp_path)
    try:
        wait_until(lambda: committed() >= 3 or proc.poll() is not None, 300, "three committed micro-batches")
        assert proc.poll() is None, f"the pipeline exited early\n{tail(tmp_path / 'etl-first.log')}"
    finally:
        kill_group(proc)
    done_before_kill = committed()
    assert 3 <= done_before_kill < 10, "the kill did not land mid-stream"
    written_before_kill = len(read_topic(spark_broker.bootstrap, "etl2-aggregates"))

    # More events arrive while the pipeline is down; they continue the event time.
    generate(spark_broker, "etl2-events", 600, START_MS + 1200 * STEP_MS, 12, "c-", tmp_path / "generate2.log")
    run(etl_command(spark_broker, "etl2", checkpoint, "--trigger", "available-now"),
        tmp_path / "etl-restart.log", cwd=tmp_path)
    assert committed() > done_before_kill

    events = input_events(spark_broker, "etl2-events")
    assert len(events) == 1800
    expected = expected_aggregates(events)
    records = read_topic(spark_broker.bootstrap, "etl2-aggregates")
    assert len(records) > written_before_kill
    by_key = output_by_key(records)
    # A micro-batch cut short by the kill may be written again after the restart: the same key
    # with the same value (idempotent by key), never a different value for a window.
    conflicting = {k: v for k, v in by_key.items() if any(value != v[0] for value in v)}
    assert conflicting == {}
    assert {k: v[0] for k, v in by_key.items()} == expected


def test_broker_killed_under_the_running_pipeline(broker_factory: Callable[..., BrokerProcess],
                                                  spark_jars: list[Path], tmp_path: Path) -> None:
    # The connector's Java clients ride out a broker crash (kill -9, restart on the same data):
    # the consumer resumes its fetches, the idempotent producer keeps its sequence with the
    # broker's recovered producer state, and the output is still exact.
    broker = broker_factory(name="crashing-broker")
    setup_topics(broker, "etl3")
    generate(broker, "etl3-events", 1200, START_MS, 13, "d-", tmp_path / "generate.log")
    expected = expected_aggregates(input_events(broker, "etl3-events"))
    checkpoint = tmp_path / "checkpoint"
    commits = checkpoint / "commits"
    proc = start(etl_command(broker, "etl3", checkpoint, "--trigger", "1 second", "--max-offsets-per-trigger", "120"),
                 tmp_path / "etl.log", cwd=tmp_path)
    try:
        wait_until(lambda: (commits.is_dir() and len(list(commits.glob("[0-9]*"))) >= 3) or proc.poll() is not None,
                   300, "three committed micro-batches")
        assert proc.poll() is None, f"the pipeline exited early\n{tail(tmp_path / 'etl.log')}"
        broker.restart(hard=True)

        def windows_written() -> int:
            try:
                return len(output_by_key(read_topic(broker.bootstrap, "etl3-aggregates", timeout=10)))
            except (KafkaException, TimeoutError):  # partitions still coming back after the crash
                return 0

        # The pipeline goes on by itself; wait until it has written everything, then stop it.
        wait_until(lambda: windows_written() >= len(expected) or proc.poll() is not None, 300,
                   "every closed window written")
        assert proc.poll() is None, f"the pipeline died with the broker\n{tail(tmp_path / 'etl.log')}"
    finally:
        kill_group(proc)
    by_key = output_by_key(read_topic(broker.bootstrap, "etl3-aggregates"))
    assert {k: v for k, v in by_key.items() if any(value != v[0] for value in v)} == {}
    assert {k: v[0] for k, v in by_key.items()} == expected
