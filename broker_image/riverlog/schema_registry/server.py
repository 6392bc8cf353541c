"""One registry instance: the ``_schemas`` reader, the writer election and the REST listener,
started and stopped together (standalone with ``riverlog schema-registry``, or inside a broker
process with ``schema.registry.listeners``)."""

from __future__ import annotations

import asyncio
import logging
import time

from aiohttp import web

from ..security.client_config import ClientSecurity
from .election import Identity, WriterElection
from .formats import parse_schema
from .kafkastore import KafkaLog
from .metrics import RegistryMetrics
from .rest import RestApi
from .service import Registry, SchemaParser
from .settings import RegistrySettings
from .store import Store

log = logging.getLogger(__name__)


class ElectedRole:
    """What the election decided, as the REST layer asks it."""

    def __init__(self, kafka_log: KafkaLog) -> None:
        self.kafka_log = kafka_log
        self.writer: Identity | None = None
        self.writing = False  # elected *and* caught up with the topic

    def is_writer(self) -> bool:
        # Elected, and not fenced off since by a newer writer's epoch in the log.
        return self.writing and not self.kafka_log.fenced

    def writer_url(self) -> str | None:
        return self.writer.url if self.writer is not None and not self.writing else None

    async def wait_for_offset(self, offset: int, timeout: float) -> bool:
        return await self.kafka_log.wait_for_offset(offset, timeout)


class RegistryServer:
    def __init__(self, settings: RegistrySettings, *, parser: SchemaParser = parse_schema,
                 security: ClientSecurity | None = None) -> None:
        self.settings = settings
        security = security or settings.kafka_security
        self.store = Store()
        self.kafka_log = KafkaLog(settings.bootstrap, settings.topic, self.store, security=security)
        self.registry = Registry(self.store, self.kafka_log, parser=parser,
                                 default_compatibility=settings.compatibility)
        self.role = ElectedRole(self.kafka_log)
        self.metrics = RegistryMetrics()
        self.metrics.track_state(lambda: (self.store.schema_count(), len(self.store.subjects()),
                                          self.role.writing, self.store.offset))
        self.identity = Identity(settings.advertised_host, settings.port, settings.scheme, settings.leader_eligible)
        self.election = WriterElection(settings.bootstrap, settings.group_id, self.identity, self._on_assignment,
                                       security=security)
        self._runner: web.AppRunner | None = None
        self._repair: asyncio.Task[None] | None = None
        self.kafka_log.on_repair_needed = self._schedule_repair

    async def start(self) -> None:
        started = time.monotonic()
        log.info("schema registry: starting; schemas in topic %s of the cluster at %s", self.settings.topic,
                 self.settings.bootstrap)
        await self.kafka_log.start()
        https = self.settings.https
        api = RestApi(self.registry, self.role, self.metrics, cluster_id=self.kafka_log.cluster_id,
                      group_id=self.settings.group_id, max_body=self.settings.max_body, auth=self.settings.auth,
                      forward_ssl=https.client_context() if https is not None else None)
        self._runner = web.AppRunner(api.app(), access_log=None)
        await self._runner.setup()
        serving = []
        for listener in self.settings.listeners:
            context = None
            if listener.scheme == "https":
                assert https is not None  # settings_from reads TLS settings whenever a listener is https
                context = https.server_context()
            await web.TCPSite(self._runner, listener.host or None, listener.port, ssl_context=context).start()
            serving.append(f"{listener.scheme}://{listener.host or '0.0.0.0'}:{listener.port}")
        self.election.start()
        auth = "basic authentication" if self.settings.auth else "no authentication"
        log.info("Riverlog schema registry ready in %.2fs at %s (listening on %s, %s): %d subjects, %d schemas",
                 time.monotonic() - started, self.settings.url, ", ".join(serving), auth,
                 len(self.store.subjects()), self.store.schema_count())

    async def stop(self) -> None:
        if self._repair is not None:
            self._repair.cancel()
        await self.election.stop()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.kafka_log.stop()

    async def _on_assignment(self, writer: Identity | None, is_me: bool) -> None:
        if not is_me:
            self.role.writing = False
            self.kafka_log.writer_epoch = None
            self.role.writer = writer
            return
        if self.role.writing and not self.kafka_log.fenced:
            return
        # Elected: read to the true end of _schemas before handing out ids. Retried for as long as
        # the election keeps choosing us (a broker may be moving the partition's leadership).
        attempt = 0
        while True:
            attempt += 1
            try:
                await self.kafka_log.catch_up_as_writer()
                break
            except Exception as exc:
                log.warning("schema registry: catching up as the new writer failed (attempt %d): %s", attempt, exc)
                await asyncio.sleep(0.5)
        self.role.writer = writer
        self.role.writing = True
        self.metrics.elections.inc()
        if self.store.unrepaired:
            self._schedule_repair()
        log.info("schema registry: this instance (%s) is the writer (epoch %s); next id %d", self.identity.url,
                 self.kafka_log.writer_epoch, self.store.max_id + 1)

    def _schedule_repair(self) -> None:
        if self._repair is None or self._repair.done():
            self._repair = asyncio.get_running_loop().create_task(self._run_repair())

    async def _run_repair(self) -> None:
        try:
            await self.registry.repair()
            log.info("schema registry: rewrote the keys a superseded writer wrote last")
        except Exception as exc:
            log.warning("schema registry: rewriting keys a superseded writer wrote failed: %s", exc)

    async def run_until_signalled(self) -> None:
        from ..server.lifecycle import run_until_signalled

        await run_until_signalled(self.start, self.stop, "the schema registry")
