"""The quorum controller: ``ControllerApi`` on a node of a Raft metadata quorum (KRaft-style).

Every node keeps a replica of the metadata log (``__cluster_metadata-0``) through its
:class:`RaftDriver`: voters take part in elections, other brokers follow as observers. Committed
entries (one JSON batch of records each, see ``codec.py``) are applied to this node's
``MetadataImage``, which the broker serves Metadata from and its replica manager follows.

Decisions are made only by the *active controller*: the Raft leader, once it has applied
everything committed before its epoch (a new leader must not decide from a stale image). It runs
the same code as ``LocalController`` (which this class extends); only ``commit`` differs: records
are proposed to the quorum and the call returns once they are committed and applied here. On any
other node, a ``ControllerApi`` call is forwarded to the active controller and returns once this
node's own image has applied the result (``forwarding.py``).

This module assembles the node and keeps the apply path; the other concerns have modules of their
own: forwarding calls to the active controller (``forwarding.py``), what the active controller
does unasked, fencing brokers whose sessions expire or whose process is gone and rebalancing
leaders (``active_duties.py``), snapshots of the image (``snapshots.py``), and the settings read
from the broker config (``settings.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ...config import BrokerConfig, ConfigError, Voter
from ...protocol.errors import ErrorCode
from ...security.acl import AclBinding, AclFilter
from ...security.client_config import controller_security
from .. import partition_ops
from ..acls import AclCreation, AclDeletion
from ..api import HeartbeatResult
from ..client_quotas import QuotaAlteration, QuotaOutcome
from ..features import FeatureOutcome, FeatureUpdate
from ..image import MetadataImage
from ..leader_balance import LeaderBalanceSettings
from ..local import LocalController
from ..partition_ops import AlterPartitionOutcome, AlterPartitionRequest, ElectionOutcome
from ..raft import Entry, NotLeaderError, Snapshot
from ..reassignment import ReassignmentItem, ReassignmentResult
from ..records import Endpoint, Record
from ..scram import (
    ScramDeletion,
    ScramUpsertion,
    UserOutcome,
    missing_bootstrap_records,
    parse_bootstrap_credentials,
)
from ..topic_ops import NewTopic, Outcome
from . import codec
from .active_duties import ActiveDuties
from .driver import LeadershipLostError, RaftDriver
from .forwarding import FORWARDABLE, CallRouter, ControllerUnavailableError
from .settings import raft_config, snapshot_settings
from .snapshots import SnapshotScheduler
from .storage import QuorumStorage
from .transport import Address, RaftTransport

log = logging.getLogger(__name__)

RESIGN_GRACE_S = 0.2  # how long a resigning leader's driver has to send EndQuorumEpoch


class QuorumController(LocalController):
    def __init__(self, config: BrokerConfig, cluster_id: str, *, voters: Sequence[Voter] | None = None) -> None:
        """``voters`` replaces ``controller.quorum.voters``: single-node mode passes the lone
        broker itself, a quorum of one that nobody connects to."""
        metadata_dir = QuorumStorage.in_log_dir(config.metadata_log_dir.resolve()).directory
        super().__init__(metadata_dir, config.node_id, cluster_id,
                         unclean_leader_election=config.get_bool("unclean.leader.election.enable"))
        voters = config.quorum_voters() if voters is None else list(voters)
        self.voter_ids = frozenset(v.node_id for v in voters)
        self.session_timeout_ms = config.get_int("broker.session.timeout.ms")
        self.heartbeat_interval_ms = config.get_int("broker.heartbeat.interval.ms")
        self.inter_broker_listener = config.inter_broker_listener()
        self.leader_balance = LeaderBalanceSettings.from_broker(config)
        try:
            self._bootstrap_scram = parse_bootstrap_credentials(config.get("bootstrap.scram.credentials"))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        rc = raft_config(config)
        self.transport = RaftTransport(
            config.node_id, cluster_id, {v.node_id: Address(v.host, v.port) for v in voters},
            request_timeout_s=rc.request_timeout_ms / 1000, fetch_wait_s=rc.fetch_max_wait_ms / 1000,
            security=controller_security(config))
        self.driver = RaftDriver(config.node_id, self.voter_ids, QuorumStorage(metadata_dir), self.transport,
                                 self._apply_entries, rc)
        self.transport.driver = self.driver
        self.applied_offset = 0  # metadata log offset below which everything is in ``image``
        self._applied = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._router = CallRouter(self)
        self._duties = ActiveDuties(self)
        max_bytes, interval_ms = snapshot_settings(config)
        self._snapshots = SnapshotScheduler(config.node_id, self.driver, max_bytes=max_bytes, interval_ms=interval_ms,
                                            applied_state=lambda: (self.image, self.applied_offset))

    @property
    def snapshot_max_bytes(self) -> int:
        """``metadata.log.max.record.bytes.between.snapshots``"""
        return self._snapshots.max_bytes

    @property
    def snapshot_interval_ms(self) -> int:
        """``metadata.log.max.snapshot.interval.ms``"""
        return self._snapshots.interval_ms

    # Life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        await self.driver.start()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._duties.keep_sessions(), name="controller-active"))
        self._tasks.append(loop.create_task(self._duties.balance_leaders(), name="controller-leader-balance"))
        if self.snapshot_interval_ms > 0:
            self._tasks.append(loop.create_task(self._snapshots.run_timer(), name="controller-snapshot-timer"))

    async def stop(self) -> None:
        """Leave the quorum: a leader resigns first (EndQuorumEpoch), so the other voters elect a
        successor at once instead of after a fetch timeout."""
        await self._cancel_tasks()
        # A lone voter (single-node mode) has nobody to hand over to: resigning would only make
        # it elect itself again before it stops.
        others = self.voter_ids - {self.node_id}
        if others and self.driver.running and self.driver.is_leader and self.driver.resign():
            await asyncio.sleep(RESIGN_GRACE_S)  # the driver loop sends EndQuorumEpoch meanwhile
        await self.halt()

    async def halt(self) -> None:
        """Stop without a word to the others (what kill -9 does to the quorum)."""
        await self._cancel_tasks()
        await self.transport.close()
        await self._router.close()
        await self.driver.stop()

    async def _cancel_tasks(self) -> None:
        tasks, self._tasks = self._tasks + list(self._duties.probes), []
        snapshot = self._snapshots.close()  # and no new snapshot tasks once stopping
        if snapshot is not None:
            tasks.append(snapshot)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def replay(self) -> None:
        """Nothing to replay from a file: the driver applies the committed log as it learns it."""

    async def wait_caught_up(self, timeout: float) -> bool:
        """Wait until this node has applied the metadata log as far as the leader had committed it
        at a fetch answered after this call: a starting broker must not serve, or register, from
        a stale image. True when caught up, False on timeout (the caller goes on, logging why)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        seen = self.transport.fetch_responses
        while loop.time() < deadline:
            if self.is_active:
                return True
            hw = self.transport.last_fetch_high_watermark
            if self.transport.fetch_responses > seen + 1 and hw is not None and self.applied_offset >= hw:
                return True
            await asyncio.sleep(0.02)
        return False

    # Applying the log ----------------------------------------------------------------------

    def _apply_entries(self, entries: list[Entry], restore: Snapshot | None) -> None:
        image = self.image
        if restore is not None:
            image = MetadataImage(cluster_id=image.cluster_id).apply(codec.decode_records(restore.data))
            self._snapshots.restored()
        records: list[Record] = []
        for entry in entries:
            records.extend(codec.decode_records(entry.data))
            self._snapshots.count_applied(len(entry.data))
        if records or restore is not None:
            self._set_image(image.apply(records))
        self.applied_offset = self.driver.node.applied_offset
        self._applied.set()
        self._applied = asyncio.Event()
        self._snapshots.maybe_start()

    async def wait_applied(self, offset: int, timeout: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.applied_offset < offset:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._applied.wait(), remaining)
        return True

    async def commit(self, records: Sequence[Record]) -> None:
        if records:
            await self.driver.propose(codec.encode_records(records))

    # Who decides ---------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        """The Raft leader with everything before its epoch applied: only it may decide."""
        driver = self.driver
        if not driver.running or not driver.is_leader:
            return False
        start = driver.node.epoch_start_offset
        return start is not None and self.applied_offset > start

    @property
    def controller_id(self) -> int:
        """The active controller if it is a live broker (clients may send it controller
        requests), else the lowest live broker, as Kafka brokers in KRaft mode answer."""
        leader = self.driver.leader_id if self.driver.running else None
        live = self.image.live_broker_ids()
        if leader is not None and (leader in live or not live):
            return leader
        return min(live) if live else self.node_id

    # Decisions of the active controller's own (see active_duties.py) -------------------------

    def begin_active_term(self) -> None:
        """On becoming the active controller: fresh sessions for every live broker (their
        heartbeats went to the previous controller), new producer id blocks (the previous
        controller's may be partly handed out)."""
        now = asyncio.get_running_loop().time()
        self.last_heartbeat = {b: now for b in self.image.brokers}
        self._next_pid = self._pid_block_end = 0

    async def commit_bootstrap_credentials(self) -> None:
        """``bootstrap.scram.credentials`` (Kafka: ``kafka-storage format --add-scram``): users
        that exist before any client can connect, so a cluster with only SASL listeners needs no
        plaintext window to make its first user. The first active controller that finds one
        missing records it; an existing credential is never replaced."""
        if not self._bootstrap_scram:
            return
        async with self._lock:
            records = missing_bootstrap_records(self.image, self._bootstrap_scram, lambda: secrets.token_bytes(32))
            if records:
                await self.commit(list(records))
                log.info("recorded bootstrap SCRAM credentials for %s",
                         ", ".join(f"{r.name} ({r.mechanism})" for r in records))

    async def fence_if_still_silent(self, broker_id: int, last_heartbeat: float, address: tuple[str, int]) -> None:
        """Fence ``broker_id``, whose listener at ``address`` refused a connection, unless a
        heartbeat came since ``last_heartbeat`` or another node decides by now."""
        async with self._lock:
            broker = self.image.brokers.get(broker_id)
            # Still live, still silent, and still this node's decision to make?
            if (broker is None or broker.fenced or not self.is_active
                    or self.last_heartbeat.get(broker_id) != last_heartbeat):
                return
            log.warning("fencing broker %d: its heartbeat is late and nothing listens at %s:%d any more",
                        broker_id, *address)
            await self.commit(partition_ops.fence_broker(self.image, broker_id,
                                                         unclean_default=self.unclean_leader_election))

    # Forwarded calls -----------------------------------------------------------------------

    async def serve_call(self, caller: int, cluster_id: str, method: str, arguments: str) -> dict[str, Any]:
        """The active controller's side of a forwarded call (the RiverlogControllerCall handler)."""
        leader = self.driver.leader_id if self.driver.running else None
        if cluster_id != self.image.cluster_id:
            return {"error_code": ErrorCode.INCONSISTENT_CLUSTER_ID,
                    "error_message": f"this is cluster {self.image.cluster_id}, not {cluster_id}"}
        if method not in FORWARDABLE:
            return {"error_code": ErrorCode.INVALID_REQUEST, "error_message": f"unknown controller method {method}"}
        if not self.is_active:
            return {"error_code": ErrorCode.NOT_CONTROLLER, "leader_id": -1 if leader is None else leader,
                    "error_message": f"node {self.node_id} is not the active controller"}
        decoded = codec.from_wire(arguments)
        call = getattr(super(), method)
        try:
            result = await call(*decoded["args"], **decoded["kwargs"])
        except (NotLeaderError, LeadershipLostError) as exc:
            return {"error_code": ErrorCode.NOT_CONTROLLER, "error_message": f"leadership moved: {exc}"}
        return {"error_code": ErrorCode.NONE, "leader_id": self.node_id, "result": codec.to_wire(result),
                "metadata_offset": self.applied_offset}

    # ControllerApi: every write goes through the active controller ---------------------------

    async def register_broker(
        self, broker_id: int, incarnation_id: str, endpoints: Sequence[Endpoint], rack: str | None
    ) -> int:
        args = (broker_id, incarnation_id, tuple(endpoints), rack)
        return await self._router.route(
            "register_broker", lambda: super(QuorumController, self).register_broker(*args), args, {})

    async def heartbeat(
        self, broker_id: int, broker_epoch: int, *, want_fence: bool = False, want_shutdown: bool = False
    ) -> HeartbeatResult:
        opts = {"want_fence": want_fence, "want_shutdown": want_shutdown}
        # A live broker's periodic heartbeat changes nothing, so it need not wait for this node's
        # metadata to catch up. It must not: after a controller failover an observer's metadata
        # fetch takes up to controller.quorum.fetch.timeout.ms to find the new leader, and a
        # heartbeat loop held up that long gets its broker fenced (Kafka's brokers heartbeat
        # independently of their metadata too). Unfencing and shutdown still wait, so the broker
        # sees its own change.
        me = self.image.brokers.get(broker_id)
        settled = me is not None and not me.fenced and not want_fence and not want_shutdown
        return await self._router.route(
            "heartbeat", lambda: super(QuorumController, self).heartbeat(broker_id, broker_epoch, **opts),
            (broker_id, broker_epoch), opts, catch_up=not settled)

    async def fence_broker(self, broker_id: int) -> None:
        await self._router.route("fence_broker", lambda: super(QuorumController, self).fence_broker(broker_id),
                                 (broker_id,), {})

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, requests: Sequence[AlterPartitionRequest]
    ) -> AlterPartitionOutcome:
        args = (broker_id, broker_epoch, list(requests))
        return await self._router.route(
            "alter_partition", lambda: super(QuorumController, self).alter_partition(*args), args, {})

    async def elect_leaders(self, items: Sequence[tuple[str, int]], election_type: int) -> list[ElectionOutcome]:
        pairs = [(topic, partition) for topic, partition in items]
        return await self._router.route(
            "elect_leaders", lambda: super(QuorumController, self).elect_leaders(pairs, election_type),
            (pairs, election_type), {})

    async def create_topics(
        self, requests: Sequence[NewTopic], *, validate_only: bool, default_partitions: int,
        default_replication: int,
    ) -> list[Outcome]:
        opts = {"validate_only": validate_only, "default_partitions": default_partitions,
                "default_replication": default_replication}
        return await self._router.route(
            "create_topics", lambda: super(QuorumController, self).create_topics(
                requests, validate_only=validate_only, default_partitions=default_partitions,
                default_replication=default_replication),
            (list(requests),), opts)

    async def delete_topics(self, items: Sequence[tuple[str | None, uuid.UUID | None]]) -> list[Outcome]:
        pairs = [(name, topic_id) for name, topic_id in items]
        return await self._router.route(
            "delete_topics", lambda: super(QuorumController, self).delete_topics(pairs), (pairs,), {})

    async def create_partitions(
        self, items: Sequence[tuple[str, int, Sequence[Sequence[int]] | None]], *, validate_only: bool
    ) -> list[Outcome]:
        triples = [(name, count, assignments) for name, count, assignments in items]
        return await self._router.route(
            "create_partitions",
            lambda: super(QuorumController, self).create_partitions(triples, validate_only=validate_only),
            (triples,), {"validate_only": validate_only})

    async def alter_topic_configs(
        self, name: str, values: Mapping[str, str | None], *, replace_all: bool, validate_only: bool
    ) -> Outcome:
        opts = {"replace_all": replace_all, "validate_only": validate_only}
        return await self._router.route(
            "alter_topic_configs",
            lambda: super(QuorumController, self).alter_topic_configs(name, dict(values), **opts),
            (name, dict(values)), opts)

    async def alter_group_configs(
        self, name: str, values: Mapping[str, str | None], *, replace_all: bool, validate_only: bool,
        limits: Mapping[str, str],
    ) -> Outcome:
        opts = {"replace_all": replace_all, "validate_only": validate_only, "limits": dict(limits)}
        return await self._router.route(
            "alter_group_configs",
            lambda: super(QuorumController, self).alter_group_configs(
                name, dict(values), replace_all=replace_all, validate_only=validate_only, limits=dict(limits)),
            (name, dict(values)), opts)

    async def alter_partition_reassignments(
        self, items: Sequence[ReassignmentItem], *, allow_replication_factor_change: bool = True
    ) -> list[ReassignmentResult]:
        triples = [(topic, partition, None if replicas is None else list(replicas))
                   for topic, partition, replicas in items]
        opts = {"allow_replication_factor_change": allow_replication_factor_change}
        return await self._router.route(
            "alter_partition_reassignments",
            lambda: super(QuorumController, self).alter_partition_reassignments(
                triples, allow_replication_factor_change=allow_replication_factor_change),
            (triples,), opts)

    async def update_features(self, updates: Sequence[FeatureUpdate], *, validate_only: bool) -> list[FeatureOutcome]:
        opts = {"validate_only": validate_only}
        return await self._router.route(
            "update_features", lambda: super(QuorumController, self).update_features(list(updates), **opts),
            (list(updates),), opts)

    async def alter_user_scram_credentials(self, deletions: Sequence[ScramDeletion],
                                           upsertions: Sequence[ScramUpsertion]) -> list[UserOutcome]:
        return await self._router.route(
            "alter_user_scram_credentials",
            lambda: super(QuorumController, self).alter_user_scram_credentials(list(deletions), list(upsertions)),
            (list(deletions), list(upsertions)), {})

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[AclCreation]:
        return await self._router.route(
            "create_acls", lambda: super(QuorumController, self).create_acls(list(bindings)), (list(bindings),), {})

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[AclDeletion]:
        return await self._router.route(
            "delete_acls", lambda: super(QuorumController, self).delete_acls(list(filters)), (list(filters),), {})
    async def alter_client_quotas(self, alterations: Sequence[QuotaAlteration], *,
                                  validate_only: bool) -> list[QuotaOutcome]:
        opts = {"validate_only": validate_only}
        return await self._router.route(
            "alter_client_quotas",
            lambda: super(QuorumController, self).alter_client_quotas(list(alterations), **opts),
            (list(alterations),), opts)

    async def allocate_producer_id(self, broker_id: int) -> int:
        return await self._router.route(
            "allocate_producer_id", lambda: super(QuorumController, self).allocate_producer_id(broker_id),
            (broker_id,), {})


__all__ = ["ControllerUnavailableError", "QuorumController", "raft_config", "snapshot_settings"]
