"""The broker process: wires config, controller, partitions, network server and metrics.

Start-up order matters: recover logs before opening listeners (clients must never see a
half-recovered partition), register with the controller (fenced), then ask to be unfenced, which
makes this broker eligible to lead; flip ``/readyz`` only once listeners accept connections.
Shutdown on SIGTERM/SIGINT is a controlled shutdown: the controller moves leadership away and
fences the broker first, then listeners close and every log is flushed and closed cleanly so
the next start skips recovery.

The controller is this node's replica of the Raft metadata quorum (``controller/quorum/``): with
``controller.quorum.voters`` set, of the cluster's quorum; without it (single-node mode), of a
quorum whose only voter is this broker. Tests that run several brokers in one process may inject
one shared controller instead (see ``controller/api.py`` for the interface).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

from .clock import now_ms
from .cluster.fetch_sessions import FetchSessionCache
from .cluster.log_cleaner import LogCleaner
from .cluster.log_dirs import LogDirs
from .cluster.partition import Partition
from .cluster.replica_manager import ReplicaManager
from .config import BrokerConfig, Voter
from .controller.api import ControllerApi
from .controller.image import MetadataImage
from .controller.local import cluster_id_for_voters, read_or_create_cluster_id
from .controller.quorum.controller import QuorumController
from .controller.quorum.legacy_single_node import migrate_legacy_records
from .controller.quorum.storage import METADATA_DIR_NAME
from .controller.records import Endpoint
from .controller.scram import as_credential
from .coordinator.config import GroupConfig
from .coordinator.runtime import GroupCoordinator
from .handlers import build_apis
from .handlers.txn_markers import write_txn_markers
from .metrics import HealthServer, Metrics
from .protocol.errors import ErrorCode
from .quotas.manager import ClientQuotaManager
from .quotas.rate import WindowConfig
from .schema_registry.embedded import EmbeddedRegistry
from .security.access import AccessControl
from .security.client_config import inter_broker_security
from .security.sasl.scram import ScramCredential
from .server.dispatch import Dispatcher
from .server.lifecycle import run_until_signalled
from .server.socket_server import SocketServer
from .share.coordinator import ShareCoordinator, ShareCoordinatorConfig
from .share.manager import SharePartitionManager, share_settings
from .share.persister import SharePersister
from .share.sessions import ShareSessionCache
from .transactions.config import TxnConfig
from .transactions.runtime import TransactionCoordinator

log = logging.getLogger(__name__)

# The lone voter of single-node mode is never connected to; DescribeQuorum shows this address.
LONE_VOTER_HOST = "localhost"
LONE_VOTER_PORT = 0


STOP_STEP_TIMEOUT_S = 10
LOG_FLUSH_THREADS = 2


class Broker:
    def __init__(self, config: BrokerConfig, controller: ControllerApi | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        log_dirs = config.log_dirs
        if not log_dirs:
            raise ValueError("log.dirs is empty (example: log.dirs=./data)")
        self.log_dir = log_dirs[0].resolve()
        self.controller: ControllerApi
        self.quorum: QuorumController | None = None
        voters = config.get("controller.quorum.voters")
        if controller is None and voters:
            # Cluster mode: a replica of the Raft metadata quorum (a voter, or an observer).
            self.cluster_id = read_or_create_cluster_id(self.log_dir, self.node_id, config.get("cluster.id"),
                                                        cluster_id_for_voters(voters))
            self.quorum = QuorumController(config, self.cluster_id)
            self.controller = self.quorum
        elif controller is None:
            # Single-node mode, as KRaft runs a lone combined node: this broker is the only voter
            # of its own metadata quorum, so it runs the same path as a cluster. Nobody connects
            # to a lone voter, hence no CONTROLLER listener and a placeholder address.
            self.cluster_id = read_or_create_cluster_id(self.log_dir, self.node_id, config.get("cluster.id"))
            migrate_legacy_records(config.metadata_log_dir.resolve() / METADATA_DIR_NAME, self.cluster_id)
            self.quorum = QuorumController(config, self.cluster_id,
                                           voters=[Voter(self.node_id, LONE_VOTER_HOST, LONE_VOTER_PORT)])
            self.controller = self.quorum
        else:
            # The shared controller's cluster id is authoritative; meta.properties must agree.
            self.cluster_id = read_or_create_cluster_id(self.log_dir, self.node_id, controller.image.cluster_id)
            self.controller = controller
        self.broker_epoch = -1
        self.schema_registry: EmbeddedRegistry | None = None
        # Every log directory, checked against meta.properties; one that fails is offline.
        self.log_dirs = LogDirs(log_dirs, self.cluster_id, self.node_id)
        self.replicas = ReplicaManager(config, self.node_id, self.log_dirs, on_follower_append=self.flush_if_needed,
                                       on_partitions_offline=self._partitions_went_offline)
        self.fetch_sessions = FetchSessionCache(config.get_int("max.incremental.fetch.session.cache.slots"),
                                                config.get_int("min.incremental.fetch.session.eviction.ms"))
        # KIP-932 share groups: the leader's side (share sessions, in-flight record states).
        self.share_sessions = ShareSessionCache()
        self.metrics = Metrics()
        self.metrics.track_partitions(self.replicas.stats)
        # ACLs (authorizer.class.name): handlers ask it before acting.
        self.access = AccessControl.configured(
            config, lambda: self.image.acls,
            lambda resource_type, operation: self.metrics.authorization_denials.labels(resource_type, operation).inc())
        self.metrics.track_log_dirs(lambda: [(str(d.path), d.online) for d in self.log_dirs.dirs])
        self.coordinator = GroupCoordinator(GroupConfig.from_broker(config), self.node_id, self.replicas,
                                            self.controller)
        self.metrics.track_consumer_groups(self.coordinator.offset_samples, self.coordinator.group_samples)
        # The transaction coordinator: __transaction_state partitions led here, markers to leaders
        # (those for partitions led here too go through the WriteTxnMarkers handler, in-process).
        self.transactions = TransactionCoordinator(TxnConfig.from_broker(config), self.node_id, self.replicas,
                                                   self.controller, config.inter_broker_listener(),
                                                   local_markers=lambda body: write_txn_markers(self, body))
        share_config = ShareCoordinatorConfig.from_broker(config)
        self.share_coordinator = ShareCoordinator(share_config, self.node_id, self.replicas, self.controller)
        self.share_persister = SharePersister(self.node_id, self.share_coordinator, lambda: self.controller.image,
                                              config.inter_broker_listener(), inter_broker_security(config),
                                              share_config.write_timeout_ms / 1000)
        self.share_partitions = SharePartitionManager(share_settings(config), persister=self.share_persister)
        self.metrics.track_share_partitions(self._share_partition_stats)
        self.coordinator.on_load_time = self.metrics.coordinator_load_seconds.labels("group").observe
        self.transactions.on_load_time = self.metrics.coordinator_load_seconds.labels("transaction").observe
        self.transactions.on_completed = (
            lambda committed, seconds: self.metrics.transaction_marker_latency.labels(
                "commit" if committed else "abort").observe(seconds))
        self.metrics.track_transactions(self.transactions.open_transaction_samples, self._lso_lag)
        self.metrics.track_controller(self._controller_stats)
        # --- log compaction (cluster/log_cleaner.py): its own threads, started and stopped below.
        self.log_cleaner = LogCleaner(config, self.replicas, self.metrics.registry)
        # Client quotas from the metadata image (quotas/), counted as requests are answered.
        self.client_quotas = ClientQuotaManager(WindowConfig(config.get_int("quota.window.num"),
                                                             config.get_int("quota.window.size.seconds") * 1000))
        self.metrics.track_client_quotas(self.client_quotas.stats)
        self.dispatcher = Dispatcher(build_apis(self), self.metrics, self.client_quotas)
        self.health = HealthServer(self.metrics, config.get("metrics.host"), config.get_int("metrics.port"))
        # fsyncs of partition logs get threads of their own: a slow or failing disk then holds up
        # flushes, not the rest of the broker's blocking work in asyncio's shared default pool.
        self._flushes = ThreadPoolExecutor(max_workers=LOG_FLUSH_THREADS,
                                           thread_name_prefix=f"log-flush-{self.node_id}")
        self._flushes_closed = False
        self.sockets = SocketServer(self.dispatcher.handle,
                                    max_frame=config.get_int("socket.request.max.bytes"),
                                    max_queued=max(1, config.get_int("max.in.flight.requests.per.connection")),
                                    on_count=self.metrics.connections.set, config=config, metrics=self.metrics,
                                    scram_credential=self._scram_credential)
        self._tasks: list[asyncio.Task[None]] = []
        self._unsubscribe: list[Callable[[], None]] = []
        self._stopped = asyncio.Event()

    def _quotas_changed(self, old: MetadataImage, new: MetadataImage) -> None:
        if old.client_quotas != new.client_quotas:
            self.client_quotas.update(new.client_quotas)

    def _scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """A SCRAM login's stored credential, from this broker's metadata image."""
        record = self.image.scram.get((user, mechanism))
        return None if record is None else as_credential(record)

    @property
    def image(self) -> MetadataImage:
        return self.controller.image

    def _share_partition_stats(self) -> Iterator[tuple[str, str, int, int, int, int, int]]:
        """The share-partitions of partitions led here, in the leader epoch they were taken up in."""
        image = self.controller.image
        for (group, topic_id, index), leader_epoch, part in self.share_partitions.items():
            topic = image.topic_by_id(topic_id)
            replica = self.replicas.get(topic.name, index) if topic is not None else None
            if topic is None or replica is None or not replica.is_leader or replica.leader_epoch != leader_epoch:
                continue
            in_flight = part.end_offset - part.start_offset
            pending = max(0, replica.high_watermark - part.start_offset - part.delivery_complete_count())
            yield group, topic.name, index, part.start_offset, in_flight, part.acquired_count(), pending

    def _lso_lag(self) -> Iterator[tuple[str, int, int]]:
        """High watermark minus last stable offset of each partition led here (metrics)."""
        for (topic, index), partition in list(self.replicas.partitions.items()):
            if partition.is_leader and not partition.offline:
                yield topic, index, partition.high_watermark - partition.last_stable_offset

    def _controller_stats(self) -> tuple[bool, int]:
        # A quorum member knows whether it is the active controller; otherwise the controller
        # (own or shared by in-process brokers) is credited to the broker it names.
        active = self.quorum.is_active if self.quorum is not None else self.controller.controller_id == self.node_id
        return active, self.image.offline_partition_count() if active else 0

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        if self.quorum is not None:
            await self._join_quorum()
        loaded = self.controller.image
        await loop.run_in_executor(None, self.replicas.load, loaded, now_ms())
        self._unsubscribe.append(self.controller.subscribe(lambda old, new: self.replicas.on_image(old, new, now_ms())))
        # After the replica manager: the coordinator loads the offsets partitions it now leads.
        self._unsubscribe.append(self.controller.subscribe(lambda old, new: self.coordinator.on_image(new)))
        self._unsubscribe.append(self.controller.subscribe(lambda old, new: self.transactions.on_image(new)))
        self._unsubscribe.append(self.controller.subscribe(lambda old, new: self.share_coordinator.on_image(new)))
        self.client_quotas.update(self.controller.image.client_quotas)
        self._unsubscribe.append(self.controller.subscribe(self._quotas_changed))
        if self.controller.image is not loaded:
            # A shared controller may have moved on while the logs were recovering.
            self.replicas.on_image(loaded, self.controller.image, now_ms())
        self.coordinator.on_image(self.controller.image)
        self.transactions.on_image(self.controller.image)
        self.share_coordinator.on_image(self.controller.image)
        self.transactions.start()
        await self.health.start()
        endpoints = [Endpoint(lst.name, lst.host, lst.port) for lst in self.config.advertised_listeners()]
        # A new incarnation each start: the controller then knows the previous process is gone.
        self.broker_epoch = await self.controller.register_broker(
            self.node_id, uuid.uuid4().hex, endpoints, self.config.get("broker.rack") or None)
        self.replicas.attach(self.controller, self.broker_epoch)
        self.replicas.fetchers.start()
        # Ready to serve: be unfenced, which elects us where a partition waited for this replica.
        await self._heartbeat()
        await self.sockets.listen(self.config.client_listeners())
        self._tasks.append(loop.create_task(self._maintenance_loop()))
        self._tasks.append(loop.create_task(self._flush_loop()))
        self._tasks.append(loop.create_task(self._isr_loop()))
        self._tasks.append(loop.create_task(self._heartbeat_loop()))
        self.log_cleaner.start()  # log compaction
        self.health.ready = True
        if EmbeddedRegistry.wanted(self.config):
            self.schema_registry = EmbeddedRegistry(self.config)
            self.schema_registry.start()
        log.info(
            "Riverlog broker %d ready in %.2fs: cluster %s, %d partitions, listeners %s, data in %s",
            self.node_id, time.monotonic() - started, self.cluster_id, len(self.replicas.partitions),
            ", ".join(f"{lst.name}://{lst.host or '0.0.0.0'}:{lst.port}" for lst in self.config.client_listeners()),
            ", ".join(str(d.path) + ("" if d.online else " (offline)") for d in self.log_dirs.dirs),
        )

    async def _join_quorum(self) -> None:
        """Serve the CONTROLLER listener (voters), start this node's replica of the metadata log
        and wait until it has caught up with the quorum, before anything reads the image."""
        assert self.quorum is not None
        await self.sockets.listen(self.config.controller_listeners())
        await self.quorum.start()
        waited = 0
        while not await self.quorum.wait_caught_up(timeout=5.0):
            waited += 5
            leader = self.quorum.driver.leader_id
            log.warning("broker %d: waiting for the metadata quorum (%ds so far; leader %s; voters %s): "
                        "a majority of the voters must be running and reachable",
                        self.node_id, waited, "unknown" if leader is None else leader,
                        self.config.get("controller.quorum.voters"))

    async def _maintenance_loop(self) -> None:
        # Runs on the event loop thread: retention and segment rolls touch the same Log objects
        # that appends use, and each step is short (stat, rename, unlink of whole segments).
        interval = self.config.get_int("log.retention.check.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval)
            self.replicas.maintenance(now_ms())

    async def _flush_loop(self) -> None:
        # Kafka leaves fsync to the OS but checkpoints how far the log is durable; doing the same
        # here (fsync in a thread, then move the recovery point) bounds the scan after kill -9.
        interval = self.config.get_int("log.flush.offset.checkpoint.interval.ms") / 1000
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            await loop.run_in_executor(self._flushes, self.replicas.flush_all)

    async def _isr_loop(self) -> None:
        # Kafka checks for lagging followers every replica.lag.time.max.ms / 2.
        interval = max(0.01, self.config.get_int("replica.lag.time.max.ms") / 2000)
        while True:
            await asyncio.sleep(interval)
            self.replicas.shrink_isrs(now_ms())

    async def _heartbeat(self) -> None:
        result = await self.controller.heartbeat(self.node_id, self.broker_epoch, want_fence=False)
        if result.error != ErrorCode.NONE:
            log.error("broker %d: heartbeat refused: %s (another process registered this node id?)",
                      self.node_id, result.error.name)

    async def _heartbeat_loop(self) -> None:
        interval = max(0.01, self.config.get_int("broker.heartbeat.interval.ms") / 1000)
        while True:
            await asyncio.sleep(interval)
            try:
                await self._heartbeat()
            except Exception:
                log.exception("broker %d: heartbeat failed", self.node_id)

    def _partitions_went_offline(self) -> None:
        # The group coordinator lets go of offsets partitions whose directory went offline (the
        # clients of those groups then look for their coordinator again and get an error).
        self.coordinator.on_image(self.controller.image)
        self.transactions.on_image(self.controller.image)
        self.share_coordinator.on_image(self.controller.image)

    def flush_if_needed(self, partition: Partition) -> None:
        if partition.log.needs_flush:
            self.flush_soon(partition)

    def flush_soon(self, partition: Partition) -> None:
        """flush.messages was reached: fsync that log in the flush threads, off the event loop."""
        if partition.flush_pending or self._flushes_closed:
            return  # once stopping, closing the logs flushes them
        partition.flush_pending = True

        def run() -> None:
            try:
                partition.log.flush()
            finally:
                partition.flush_pending = False

        asyncio.get_running_loop().run_in_executor(self._flushes, run)

    async def stop(self) -> None:
        self.health.ready = False
        if self.schema_registry is not None:
            await self._bounded("stopping the schema registry", self.schema_registry.stop())
        # Every step is bounded: a shutdown must never hang (a stuck step is logged by name, so
        # it can be found, and the broker still closes its logs cleanly).
        await self._bounded("cancelling tasks", self._cancel_tasks())  # no heartbeat may unfence us now
        await self._bounded("stopping fetchers", self.replicas.fetchers.stop())
        if self.broker_epoch >= 0:
            # Controlled shutdown: leadership moves to other in-sync replicas while we still answer
            # (in-flight requests end with NOT_LEADER_OR_FOLLOWER and clients move on).
            # Bounded by the session timeout: past it the controller fences us anyway, and with
            # no quorum left (the last voters stopping) it would never be acknowledged.
            await self._bounded("controlled shutdown",
                                self.controller.heartbeat(self.node_id, self.broker_epoch, want_shutdown=True),
                                timeout=self.config.get_int("broker.session.timeout.ms") / 1000 + 1)
        if self.quorum is not None:
            # Hand the metadata quorum over (a leader resigns, so the others elect at once) while
            # the CONTROLLER listener still answers.
            await self._bounded("leaving the metadata quorum", self.quorum.stop())
        self.sockets.close()
        await self._bounded("stopping the group coordinator", self.coordinator.stop())
        await self._bounded("stopping the transaction coordinator", self.transactions.stop())
        await self._bounded("stopping the share coordinator", self.share_coordinator.stop())
        await self._bounded("closing the share persister's connections", self.share_persister.stop())
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        await self._bounded("stopping the log cleaner", self.log_cleaner.stop())  # before the logs close
        # No flush may run while the logs close (closing flushes them anyway).
        await self._bounded("finishing log flushes", self._close_flushes())
        await asyncio.get_running_loop().run_in_executor(None, self.replicas.close)
        await self.health.stop()
        self._stopped.set()

    async def _close_flushes(self) -> None:
        self._flushes_closed = True
        await asyncio.get_running_loop().run_in_executor(None, lambda: self._flushes.shutdown(wait=True))

    async def _bounded(self, step: str, work: Awaitable[object], timeout: float = STOP_STEP_TIMEOUT_S) -> None:
        try:
            await asyncio.wait_for(work, timeout)
        except TimeoutError:
            log.error("broker %d: %s did not finish within %gs; going on with the shutdown",
                      self.node_id, step, timeout)
        except Exception:
            log.exception("broker %d: %s failed; going on with the shutdown", self.node_id, step)

    async def halt(self) -> None:
        """Stop as abruptly as kill -9 would, for in-process fault tests: no controlled shutdown,
        sockets dropped, fetchers and timers gone, logs left without checkpoints or clean-shutdown
        marker. The controller is not told: fencing the broker is the caller's (or the session
        timeout's) business."""
        self.health.ready = False
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self.sockets.abort()
        await self._cancel_tasks()
        if self.quorum is not None:
            await self.quorum.halt()
        await self.replicas.fetchers.stop()
        await self.coordinator.stop()
        await self.transactions.stop()
        await self.share_coordinator.stop()
        await self.share_persister.stop()
        await self.log_cleaner.stop()
        self._flushes_closed = True
        self._flushes.shutdown(wait=False)
        self.replicas.abandon()
        await self.health.stop()
        self._stopped.set()

    async def _cancel_tasks(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def run_until_signalled(self) -> None:
        await run_until_signalled(self.start, self.stop, f"broker {self.node_id}")

