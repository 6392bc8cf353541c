"""Riverlog brokers in one process, each with its own replica of the Raft metadata quorum.

Unlike ``InProcessCluster`` (one shared controller object), nothing is shared here but the event
loop: every broker is configured as in production (``process.roles=broker,controller``,
``controller.quorum.voters``, a CONTROLLER listener), elects controllers, replicates the metadata
log and forwards controller calls over loopback TCP. Faults: ``crash`` stops a broker as kill -9
would; ``stop`` is a controlled shutdown.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from riverlog.broker import Broker
from riverlog.config import BrokerConfig
from riverlog.controller.image import MetadataImage

TEST_SETTINGS: dict[str, str] = {
    "offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0",
    "replica.fetch.backoff.ms": "100", "replica.fetch.wait.max.ms": "200",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class QuorumCluster:
    def __init__(self, base: Path, size: int = 3, overrides: Mapping[str, object] | None = None,
                 *, voters: int | None = None) -> None:
        self.base = base
        self.size = size
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        self.ports = {n: free_port() for n in range(1, size + 1)}
        voter_ids = range(1, (voters or size) + 1)
        self.controller_ports = {n: free_port() for n in voter_ids}
        self.voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in self.controller_ports.items())
        self.brokers: dict[int, Broker] = {}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    def config(self, node_id: int) -> BrokerConfig:
        listeners = f"PLAINTEXT://127.0.0.1:{self.ports[node_id]}"
        roles = "broker"
        if node_id in self.controller_ports:
            listeners += f",CONTROLLER://127.0.0.1:{self.controller_ports[node_id]}"
            roles = "broker,controller"
        replication = str(min(3, self.size))
        return BrokerConfig({
            "node.id": str(node_id), "process.roles": roles, "listeners": listeners,
            "controller.quorum.voters": self.voters, "log.dirs": str(self.base / f"node{node_id}"),
            "metrics.host": "127.0.0.1", "metrics.port": "0",
            "offsets.topic.replication.factor": replication, "default.replication.factor": replication,
            "min.insync.replicas": str(min(2, self.size)),
            **TEST_SETTINGS, **self.overrides,
        })

    async def start(self) -> QuorumCluster:
        # All at once: a broker's start waits for the quorum, which needs a majority running.
        await asyncio.gather(*(self.start_broker(n) for n in self.ports))
        return self

    async def start_broker(self, node_id: int) -> Broker:
        broker = Broker(self.config(node_id))
        await broker.start()
        self.brokers[node_id] = broker
        return broker

    async def crash(self, node_id: int) -> None:
        await self.brokers.pop(node_id).halt()

    async def stop_broker(self, node_id: int) -> None:
        await self.brokers.pop(node_id).stop()

    async def stop(self) -> None:
        for node_id in list(self.brokers):
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
