"""Several Riverlog brokers in one process and event loop, around one shared controller.

The shared ``LocalController`` stands in for the metadata quorum, so a test can fence a broker
at the moment it chooses and read the image without a network hop; everything else is real: each
broker has its own log directory and loopback port, and replication between brokers goes over
TCP with the Kafka protocol. Faults are injected from the test:
``crash`` stops a broker as kill -9 would (no controlled shutdown, logs not closed cleanly), and
``fence`` tells the controller it is gone, which is what a missed heartbeat will do.

Blocking clients (confluent-kafka) must run in threads (``asyncio.to_thread``): the brokers
live on the test's event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from riverlog.controller.image import PartitionImage
from riverlog.devcluster import DevCluster

from support.brokers import free_ports

CLUSTER_ID = "riverlog-inprocess-test"


class InProcessCluster(DevCluster):
    """The dev cluster on free loopback ports with test-friendly timings, plus fault injection."""

    def __init__(self, base: Path, size: int = 3, overrides: Mapping[str, object] | None = None) -> None:
        test_settings: dict[str, object] = {
            "min.insync.replicas": 1, "offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 0,
            "replica.fetch.backoff.ms": 100, "replica.fetch.wait.max.ms": 200,
        }
        ports = dict(zip(range(1, size + 1), free_ports(size), strict=True))
        super().__init__(base, size, {**test_settings, **(overrides or {})}, ports=ports, cluster_id=CLUSTER_ID)

    async def crash(self, node_id: int) -> None:
        await self.brokers.pop(node_id).halt()

    async def fence(self, node_id: int) -> None:
        await self.controller.fence_broker(node_id)

    # Looking at the cluster ------------------------------------------------------------------

    def partition(self, topic: str, index: int = 0) -> PartitionImage:
        return self.controller.image.topics[topic].partitions[index]

    async def wait_until(self, condition: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
            await asyncio.sleep(0.02)

    def log_bytes(self, node_id: int, topic: str, index: int = 0, *, upto: int | None = None) -> bytes:
        """The raw record batches of a replica's log (below ``upto``, default its log end)."""
        p = self.brokers[node_id].replicas.get(topic, index)
        assert p is not None
        end = p.log.log_end_offset if upto is None else upto
        return p.log.read_records_bytes(p.log.log_start_offset, 1 << 30, max_offset=end)


def run_scenario(tmp_path: Path, scenario: Callable[[InProcessCluster], Awaitable[None]], size: int = 3,
                 overrides: Mapping[str, object] | None = None) -> None:
    """Start an in-process cluster, run ``scenario`` on it, and stop it whatever happens."""

    async def main() -> None:
        cluster = InProcessCluster(tmp_path, size, overrides)
        await cluster.start()
        try:
            await scenario(cluster)
        finally:
            await cluster.stop()

    asyncio.run(main())
