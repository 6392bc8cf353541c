"""The controller gauges the chart's alerts are built on (``riverlog_active_controller_count``,
``riverlog_offline_partitions_count``), scraped from brokers of a real Raft quorum in one process.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from riverlog.broker import Broker
from riverlog.controller.topic_ops import NewTopic
from riverlog.protocol.errors import ErrorCode
from support.quorum_cluster import QuorumCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]


def gauge(broker: Broker, name: str) -> float:
    """One unlabelled gauge as Prometheus would scrape it from the broker."""
    for line in broker.metrics.render().decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in the broker's metrics")


def test_one_active_controller_reports_offline_partitions(tmp_path: Path) -> None:
    async def main() -> None:
        cluster = QuorumCluster(tmp_path, 3)
        await cluster.start()
        try:
            await cluster.wait_until(lambda: cluster.active_controller() is not None, what="an active controller")
            active = cluster.active_controller()
            assert active is not None
            counts = {n: gauge(b, "riverlog_active_controller_count") for n, b in cluster.brokers.items()}
            assert counts == {n: (1.0 if n == active else 0.0) for n in cluster.brokers}

            # One partition whose only replica is a broker other than the active controller.
            victim = next(n for n in cluster.brokers if n != active)
            (outcome,) = await cluster.brokers[active].controller.create_topics(
                [NewTopic("lonely", assignments={0: [victim]})],
                validate_only=False, default_partitions=1, default_replication=1)
            assert outcome.error == ErrorCode.NONE, outcome.message
            assert gauge(cluster.brokers[active], "riverlog_offline_partitions_count") == 0

            # Its broker dies: once its session expires the partition has no leader, which only the
            # active controller reports (so a sum over the cluster counts it once).
            await cluster.crash(victim)
            await cluster.wait_until(
                lambda: gauge(cluster.brokers[active], "riverlog_offline_partitions_count") == 1,
                what="the offline partition in the active controller's metrics")
            for n, b in cluster.brokers.items():
                if n != active:
                    assert gauge(b, "riverlog_offline_partitions_count") == 0
                    assert gauge(b, "riverlog_active_controller_count") == 0
        finally:
            await cluster.stop()

    asyncio.run(main())
