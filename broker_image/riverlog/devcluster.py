"""Local multi-broker clusters in one process.

``QuorumDevCluster`` is ``riverlog dev --brokers 3``: each broker a full Riverlog node with its
own listeners, metrics port and log directory, the first three voting in the Raft metadata
quorum, all replicating to each other over loopback with the Kafka protocol exactly as separate
processes do.

``DevCluster`` shares one ``LocalController`` object between the brokers instead of a quorum:
the replication tests (``tests/support/inprocess_cluster.py``) use it to inspect and drive the
controller directly (fence a broker at a chosen moment, read the image without a network hop).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from pathlib import Path

from .broker import Broker
from .config import BrokerConfig
from .controller.leader_balance import LeaderBalanceSettings, run_periodically
from .controller.local import LocalController, read_or_create_cluster_id
from .server.lifecycle import run_until_signalled

log = logging.getLogger(__name__)


class _LocalCluster:
    """What both local clusters share: ports, directories, the common broker properties, and
    stopping one broker at a time."""

    def __init__(
        self,
        base: Path,
        size: int,
        overrides: Mapping[str, object] | None,
        ports: Mapping[int, int] | None,
        metrics_ports: Mapping[int, int] | None,
        host: str,
        advertised_host: str | None,
    ) -> None:
        if size < 1:
            raise ValueError("a cluster needs at least one broker")
        self.base = base
        self.size = size
        self.host = host
        self.advertised_host = advertised_host or host
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        self.ports = dict(ports) if ports else {n: 9091 + n for n in range(1, size + 1)}
        self.metrics_ports = dict(metrics_ports) if metrics_ports else {n: 0 for n in self.ports}
        self.brokers: dict[int, Broker] = {}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.advertised_host}:{port}" for port in self.ports.values())

    def base_properties(self, node_id: int) -> dict[str, str]:
        replication = str(min(3, self.size))
        return {
            "node.id": str(node_id), "listeners": f"PLAINTEXT://{self.host}:{self.ports[node_id]}",
            "advertised.listeners": f"PLAINTEXT://{self.advertised_host}:{self.ports[node_id]}",
            "log.dirs": str(self.base / f"broker{node_id}"), "metrics.host": self.host,
            "metrics.port": str(self.metrics_ports[node_id]),
            "offsets.topic.replication.factor": replication, "default.replication.factor": replication,
            "min.insync.replicas": str(min(2, self.size)),
        }

    async def start(self) -> object:
        raise NotImplementedError

    async def stop_brokers(self) -> None:
        # One at a time, each a controlled shutdown, so leadership moves to the brokers still up.
        for node_id in list(self.brokers):
            await self.brokers.pop(node_id).stop()

    async def stop(self) -> None:
        await self.stop_brokers()

    def ready_message(self) -> str:
        return f"Riverlog dev cluster of {self.size} brokers ready: bootstrap {self.bootstrap}, data in {self.base}"

    async def run_until_signalled(self) -> None:
        async def start() -> None:
            await self.start()
            log.info("%s", self.ready_message())

        await run_until_signalled(start, self.stop, "the dev cluster")


class DevCluster(_LocalCluster):
    def __init__(
        self,
        base: Path,
        size: int = 3,
        overrides: Mapping[str, object] | None = None,
        *,
        ports: Mapping[int, int] | None = None,
        metrics_ports: Mapping[int, int] | None = None,
        host: str = "127.0.0.1",
        advertised_host: str | None = None,
        cluster_id: str | None = None,
    ) -> None:
        super().__init__(base, size, overrides, ports, metrics_ports, host, advertised_host)
        controller_dir = base / "controller"
        cid = cluster_id or read_or_create_cluster_id(controller_dir, 0, "")
        self.controller = LocalController(controller_dir / "__cluster_metadata-0", 1, cid)
        self._expiry: asyncio.Task[None] | None = None
        self._rebalance: asyncio.Task[None] | None = None

    def config(self, node_id: int) -> BrokerConfig:
        return BrokerConfig({**self.base_properties(node_id), **self.overrides})

    async def start(self) -> DevCluster:
        self.controller.replay()
        for node_id in self.ports:
            await self.start_broker(node_id)
        self._expiry = asyncio.get_running_loop().create_task(self._expire_sessions())
        # The controller's other periodic duty: preferred leaders back once they can lead.
        balance = LeaderBalanceSettings.from_broker(self.config(next(iter(self.ports))))
        self._rebalance = asyncio.get_running_loop().create_task(run_periodically(
            lambda: self.controller.balance_leaders(balance.imbalance_percentage), balance))
        return self

    async def _expire_sessions(self) -> None:
        """The controller's side of broker liveness: a broker that stops heartbeating (crashed,
        hung, cut off) is fenced after broker.session.timeout.ms and its partitions fail over."""
        timeout_ms = self.config(next(iter(self.ports))).get_int("broker.session.timeout.ms")
        while True:
            await asyncio.sleep(min(0.25, timeout_ms / 4000))
            try:
                await self.controller.fence_expired(timeout_ms)
            except Exception:
                log.exception("fencing expired brokers failed")

    async def start_broker(self, node_id: int) -> Broker:
        broker = Broker(self.config(node_id), self.controller)
        await broker.start()
        self.brokers[node_id] = broker
        return broker

    async def stop(self) -> None:
        for task in (self._expiry, self._rebalance):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self.stop_brokers()


class QuorumDevCluster(_LocalCluster):
    """``riverlog dev``: N brokers in one process, each its own node of the Raft metadata quorum.

    Nothing is shared but the event loop: every broker is configured as a production node would
    be (``process.roles=broker,controller`` for the first three, ``controller.quorum.voters``, a
    CONTROLLER listener), elects the active controller with the others, replicates the metadata
    log and forwards controller calls over loopback. Brokers beyond the third are observers.
    """

    VOTERS_MAX = 3

    def __init__(
        self,
        base: Path,
        size: int = 3,
        overrides: Mapping[str, object] | None = None,
        *,
        ports: Mapping[int, int] | None = None,
        controller_ports: Mapping[int, int] | None = None,
        metrics_ports: Mapping[int, int] | None = None,
        host: str = "127.0.0.1",
        advertised_host: str | None = None,
        registry_port: int = 0,
    ) -> None:
        super().__init__(base, size, overrides, ports, metrics_ports, host, advertised_host)
        # A schema registry inside the first broker (0: none); one instance is enough for a
        # cluster whose brokers share one process and so stop together.
        self.registry_port = registry_port
        voter_ids = list(self.ports)[: self.VOTERS_MAX]
        self.controller_ports = (dict(controller_ports) if controller_ports
                                 else {n: self.ports[n] + 10000 for n in voter_ids})
        self.voters = ",".join(f"{n}@{self.advertised_host}:{p}" for n, p in self.controller_ports.items())

    def config(self, node_id: int) -> BrokerConfig:
        props = self.base_properties(node_id)
        props["process.roles"] = "broker"
        if node_id in self.controller_ports:
            props["listeners"] += f",CONTROLLER://{self.host}:{self.controller_ports[node_id]}"
            props["process.roles"] = "broker,controller"
        if self.registry_port and node_id == next(iter(self.ports)):
            props["schema.registry.listeners"] = f"http://{self.host}:{self.registry_port}"
            props["schema.registry.host.name"] = self.advertised_host
        return BrokerConfig({**props, "controller.quorum.voters": self.voters, **self.overrides})

    async def start(self) -> QuorumDevCluster:
        # All at once: each broker's start waits for the quorum, which needs a majority running.
        await asyncio.gather(*(self.start_broker(n) for n in self.ports))
        return self

    async def start_broker(self, node_id: int) -> Broker:
        broker = Broker(self.config(node_id))
        await broker.start()
        self.brokers[node_id] = broker
        return broker

    def ready_message(self) -> str:
        registry = f", schema registry {self.registry_url}" if self.registry_port else ""
        return f"{super().ready_message()}, controller quorum {self.voters}{registry}"

    @property
    def registry_url(self) -> str:
        return f"http://{self.advertised_host}:{self.registry_port}"
