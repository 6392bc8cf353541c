"""Riverlog brokers in one process, each with its own replica of the Raft metadata quorum.

The dev cluster of ``riverlog dev`` (``QuorumDevCluster``) on free loopback ports with
test-friendly timings. Nothing is shared but the event loop: every broker elects controllers,
replicates the metadata log and forwards controller calls over loopback TCP, as separate
processes do. Faults: ``crash`` stops a broker as kill -9 would; ``stop_broker`` is a controlled
shutdown.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from riverlog.controller.image import MetadataImage
from riverlog.devcluster import QuorumDevCluster

from support.brokers import free_ports

TEST_SETTINGS: dict[str, object] = {
    "offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 0,
    "replica.fetch.backoff.ms": 100, "replica.fetch.wait.max.ms": 200,
}


class QuorumCluster(QuorumDevCluster):
    def __init__(self, base: Path, size: int = 3, overrides: Mapping[str, object] | None = None,
                 *, voters: int | None = None) -> None:
        voter_count = min(size, voters or self.VOTERS_MAX)
        picked = free_ports(size + voter_count)
        ports = {n: picked[n - 1] for n in range(1, size + 1)}
        controller_ports = {n: picked[size + n - 1] for n in range(1, voter_count + 1)}
        super().__init__(base, size, {**TEST_SETTINGS, **(overrides or {})}, ports=ports,
                         controller_ports=controller_ports)

    async def crash(self, node_id: int) -> None:
        await self.brokers.pop(node_id).halt()

    async def stop_broker(self, node_id: int) -> None:
        await self.brokers.pop(node_id).stop()

    # Looking at the cluster ------------------------------------------------------------------

    def active_controller(self) -> int | None:
        active = [n for n, b in self.brokers.items() if b.quorum is not None and b.quorum.is_active]
        return active[0] if len(active) == 1 else None

    def images(self) -> dict[int, MetadataImage]:
        return {n: b.controller.image for n, b in self.brokers.items()}

    async def wait_until(self, condition: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
            await asyncio.sleep(0.02)
