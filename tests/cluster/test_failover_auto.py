"""Failover without any help from the test: a crashed leader stops heartbeating, the controller
fences it after broker.session.timeout.ms, a new leader is elected from the ISR and an idempotent
acks=all producer carries on with nothing lost. The unavailability window is printed (and
measured by bench/failover.py for docs/benchmarks.md), never asserted."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import pytest
from support.inprocess_cluster import InProcessCluster
from test_replication_inprocess import TOPIC, NumberedProducer, caught_up, create_topic, values_in_log, wait_acked

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]


class TimedProducer(NumberedProducer):
    """Also remembers when each acknowledgement arrived."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        self.ack_times: list[float] = []

    def _delivered(self, err: Any, msg: Any) -> None:
        super()._delivered(err, msg)
        if err is None:
            with self.lock:
                self.ack_times.append(time.monotonic())


async def crash_leader_and_measure(tmp_path: Path) -> float:
    """The longest pause between acknowledgements around the leader's crash, in seconds: how
    long the partition could not take writes (acks already in flight at the crash don't count
    as writes taken)."""
    cluster = InProcessCluster(tmp_path, 3, {"replica.lag.time.max.ms": 1000})
    await cluster.start()
    producer = TimedProducer(cluster.bootstrap)
    producing = asyncio.ensure_future(asyncio.to_thread(producer.run))
    try:
        await create_topic(cluster)
        await wait_acked(producer, 2000)
        leader = cluster.partition(TOPIC).leader
        acked_at_crash = producer.count()
        crashed_at = time.monotonic()
        await cluster.crash(leader)  # no fence: the session timeout must notice by itself
        await cluster.wait_until(lambda: cluster.partition(TOPIC).leader not in (leader, -1), timeout=30,
                                 what="a new leader elected after the session timeout")
        assert leader not in cluster.partition(TOPIC).isr
        await wait_acked(producer, acked_at_crash + 2000)
        with producer.lock:
            times = sorted(t for t in producer.ack_times if t > crashed_at - 1.0)
        window = max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)
        producer.stop.set()
        await producing
        assert not producer.errors, producer.errors[:5]
        survivors = [n for n in (1, 2, 3) if n != leader]
        await caught_up(cluster, survivors)
        values = [v for _, v in values_in_log(cluster, survivors[0])]
        assert len(values) == len(set(values)), "a record is in the log twice"
        assert values == sorted(values), "records are out of produce order"
        in_log = set(values)
        assert not [v for v in producer.acked if v not in in_log], "acknowledged records lost"
        assert cluster.log_bytes(survivors[0], TOPIC) == cluster.log_bytes(survivors[1], TOPIC)
        return window
    finally:
        producer.stop.set()
        with contextlib.suppress(Exception):
            await producing
        await cluster.stop()


def test_crashed_leader_is_fenced_by_session_timeout_and_nothing_acknowledged_is_lost(tmp_path: Path) -> None:
    window = asyncio.run(crash_leader_and_measure(tmp_path))
    print(f"unavailability window: {window:.2f}s (longest gap between acknowledgements around the crash)")
