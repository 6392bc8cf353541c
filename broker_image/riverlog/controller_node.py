"""A dedicated controller (``process.roles=controller``): a voter of the metadata quorum that
hosts no partitions and serves no clients.

It is the quorum half of a combined node: its CONTROLLER listener answers the Raft RPCs, the
brokers' forwarded controller calls and DescribeQuorum, and nothing else (other requests get
UNSUPPORTED_VERSION, as Kafka's controller listener does). When it is the active controller it
fences brokers whose heartbeats stop and runs the leader rebalance, like any active controller.
Brokers (``process.roles=broker``) follow its log as observers.
"""

from __future__ import annotations

import logging
import time

from .config import BrokerConfig
from .controller.local import cluster_id_for_voters, read_or_create_cluster_id
from .controller.quorum.controller import QuorumController
from .handlers import build_controller_apis
from .metrics import HealthServer, Metrics
from .security.access import AccessControl
from .server.dispatch import Dispatcher
from .server.lifecycle import run_until_signalled
from .server.socket_server import SocketServer

log = logging.getLogger(__name__)


class ControllerNode:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        metadata_dir = config.metadata_log_dir.resolve()
        voters = config.get("controller.quorum.voters")
        self.cluster_id = read_or_create_cluster_id(metadata_dir, self.node_id, config.get("cluster.id"),
                                                    cluster_id_for_voters(voters))
        self.quorum: QuorumController | None = QuorumController(config, self.cluster_id)
        self.metrics = Metrics()
        self.metrics.track_controller(self._controller_stats)
        quorum = self.quorum
        self.access = AccessControl.configured(config, lambda: quorum.image.acls, self._count_denial)
        self.dispatcher = Dispatcher(build_controller_apis(self), self.metrics)
        self.health = HealthServer(self.metrics, config.get("metrics.host"), config.get_int("metrics.port"))
        # Only the quorum's peers and the brokers connect here, a handful of connections each.
        self.sockets = SocketServer(self.dispatcher.handle, max_frame=config.get_int("socket.request.max.bytes"),
                                    max_queued=100, config=config, metrics=self.metrics)

    def _count_denial(self, resource_type: str, operation: str) -> None:
        self.metrics.authorization_denials.labels(resource_type, operation).inc()

    def _controller_stats(self) -> tuple[bool, int]:
        quorum = self.quorum
        active = quorum is not None and quorum.is_active
        return active, quorum.image.offline_partition_count() if quorum is not None and active else 0

    async def start(self) -> None:
        started = time.monotonic()
        await self.sockets.listen(self.config.controller_listeners())
        assert self.quorum is not None
        await self.quorum.start()
        await self.health.start()
        self.health.ready = True
        log.info("Riverlog controller %d ready in %.2fs: cluster %s, voters %s, listeners %s", self.node_id,
                 time.monotonic() - started, self.cluster_id, self.config.get("controller.quorum.voters"),
                 ", ".join(f"{lst.name}://{lst.host or '0.0.0.0'}:{lst.port}"
                           for lst in self.config.controller_listeners()))

    async def stop(self) -> None:
        self.health.ready = False
        if self.quorum is not None:
            await self.quorum.stop()  # a leader resigns while its listener still answers
        self.sockets.close()
        await self.health.stop()

    async def halt(self) -> None:
        """As kill -9 would: no resignation, sockets dropped."""
        self.health.ready = False
        self.sockets.abort()
        if self.quorum is not None:
            await self.quorum.halt()
        await self.health.stop()

    async def run_until_signalled(self) -> None:
        await run_until_signalled(self.start, self.stop, f"controller {self.node_id}")
