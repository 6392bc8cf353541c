"""A registry instance inside a broker process (``schema.registry.listeners``): the one-command
local start (``make run``) gets a registry without a second process. It is an ordinary instance:
a Kafka client of the broker's own advertised PLAINTEXT listener, electing a writer with any
other instances of the cluster."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ..config import BrokerConfig
from .server import RegistryServer
from .settings import settings_from

log = logging.getLogger(__name__)


class EmbeddedRegistry:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.server: RegistryServer | None = None
        self._task: asyncio.Task[None] | None = None

    @staticmethod
    def wanted(config: BrokerConfig) -> bool:
        return bool(config.get("schema.registry.listeners").strip())

    def start(self) -> None:
        """Start in the background: the broker is serving already, the registry follows."""
        # BrokerConfig refused a registry without a PLAINTEXT listener at start.
        plain = [lst for lst in self.config.advertised_listeners()
                 if self.config.security_protocol(lst.name) == "PLAINTEXT"]
        props = {"listeners": self.config.get("schema.registry.listeners"),
                 "kafkastore.bootstrap.servers": f"{plain[0].host}:{plain[0].port}"}
        if self.config.get("schema.registry.host.name"):
            props["host.name"] = self.config.get("schema.registry.host.name")
        self.server = RegistryServer(settings_from(props))
        # A cluster starting together (riverlog dev) registers its brokers over a few moments:
        # wait for as many as its topics replicate to, so _schemas is not created with one copy.
        self.server.kafka_log.expected_brokers = min(3, self.config.get_int("default.replication.factor"))
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        assert self.server is not None
        try:
            await self.server.start()
        except Exception:
            log.exception("the embedded schema registry did not start; the broker goes on without it")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.server is not None:
            await self.server.stop()
