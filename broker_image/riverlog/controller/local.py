"""The local controller: decides with the pure functions and commits to a local file.

Decisions come from the pure functions (``topic_ops``, ``partition_ops``, ``reassignment``,
``leader_balance``); this class orders them under one lock and makes their records durable.
``QuorumController`` extends it and replaces only ``commit`` (propose to the Raft quorum, return
once committed and applied), so every node, a lone one included, decides with this code.

Used on its own, records are JSON lines fsynced before they apply (an acknowledged admin request
survives kill -9; a torn last line is dropped on replay). Brokers no longer run it on their own:
a broker without ``controller.quorum.voters`` is a one-voter Raft quorum, as KRaft runs a lone
node, and a data folder from the days when single-node mode used this file is carried over
(``quorum/legacy_single_node.py``). What remains is the in-process test cluster
(``devcluster.DevCluster``): several brokers of one process share one instance, each subscribing
to its image, so tests can fence a broker at a chosen moment, while the brokers still replicate
data to each other over TCP. It implements ``api.ControllerApi``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..protocol.errors import ErrorCode
from ..security.acl import AclBinding, AclFilter
from . import leader_balance, partition_ops, reassignment
from .acls import AclCreation, AclDeletion, create_acls, delete_acls
from .api import HeartbeatResult, ImageListener, Unsubscribe
from .client_quotas import QuotaAlteration, QuotaOutcome, alter_quotas
from .features import FeatureOutcome, FeatureUpdate, update_features
from .group_config_ops import alter_group_configs
from .image import MetadataImage
from .partition_ops import AlterPartitionOutcome, AlterPartitionRequest, ElectionOutcome
from .reassignment import OngoingReassignment, ReassignmentItem, ReassignmentResult
from .records import Endpoint, ProducerIdsRecord, Record, from_json, to_json
from .scram import ScramDeletion, ScramUpsertion, UserOutcome, alter_credentials
from .topic_ops import (
    EXCESSIVE_PARTITIONS,
    MAX_PARTITIONS_PER_REQUEST,
    MAX_RECORDS_PER_REQUEST,
    TOO_MANY_RECORDS,
    NewTopic,
    Outcome,
    alter_topic_configs,
    create_partitions,
    create_topic,
    delete_topic,
    requested_partitions,
)

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK = 1000


def read_or_create_cluster_id(log_dir: Path, node_id: int, configured: str, default_id: str = "") -> str:
    """Kafka's ``meta.properties``: the cluster id is fixed at first start and checked after.
    Without a configured one, ``default_id`` (if given) or a random id is used at first start."""
    meta = log_dir / "meta.properties"
    if meta.exists():
        props = dict(
            line.split("=", 1) for line in meta.read_text().splitlines() if "=" in line and not line.startswith("#")
        )
        existing = props.get("cluster.id", "")
        if configured and existing and configured != existing:
            raise ValueError(
                f"cluster.id {configured} does not match {existing} stored in {meta}; "
                "use the original id or a fresh log directory"
            )
        return existing or configured
    cluster_id = configured or default_id or uuid.uuid4().hex[:22]
    log_dir.mkdir(parents=True, exist_ok=True)
    tmp = meta.with_suffix(".tmp")
    tmp.write_text(f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n")
    os.replace(tmp, meta)
    return cluster_id


def cluster_id_for_voters(voters_spec: str) -> str:
    """The cluster id of a quorum whose nodes set no ``cluster.id``: derived from
    ``controller.quorum.voters``, so nodes configured alike agree without Kafka's separate
    ``kafka-storage format -t <id>`` step (a configured ``cluster.id`` still wins)."""
    normalized = ",".join(sorted(p.strip() for p in voters_spec.split(",") if p.strip()))
    digest = hashlib.sha256(normalized.encode()).digest()[:16]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def read_records_file(path: Path) -> tuple[list[Record], int]:
    """The records of a JSON-lines metadata file, and how many of its bytes hold them: reading
    stops at a torn last line (or an unreadable one), which only a crash mid-append leaves."""
    records: list[Record] = []
    good_bytes = 0
    with open(path, "rb") as fh:
        for line in fh:
            if not line.endswith(b"\n"):
                break
            try:
                records.append(from_json(json.loads(line)))
            except (ValueError, KeyError, TypeError):
                log.warning("metadata log %s: dropping unreadable record and all after it", path)
                break
            good_bytes += len(line)
    return records, good_bytes


class LocalController:
    def __init__(self, metadata_dir: Path, node_id: int, cluster_id: str, *,
                 unclean_leader_election: bool = False) -> None:
        self.node_id = node_id
        self.dir = metadata_dir
        self.path = metadata_dir / "records.jsonl"
        self.image = MetadataImage(cluster_id=cluster_id)
        # Broker default of unclean.leader.election.enable (topics may override it).
        self.unclean_leader_election = unclean_leader_election
        self._listeners: list[ImageListener] = []
        self._lock = asyncio.Lock()
        self._pid_block_end = 0
        self._next_pid = 0
        self._placement_start = 0
        self._replayed = False
        self.last_heartbeat: dict[int, float] = {}  # broker id -> loop time, for session expiry

    @property
    def controller_id(self) -> int:
        """This controller's node if it is a live broker, else the lowest live broker: clients send
        controller requests to the id Metadata names, and any broker can serve them here."""
        live = self.image.live_broker_ids()
        if self.node_id in live or not live:
            return self.node_id
        return min(live)

    def subscribe(self, listener: ImageListener) -> Unsubscribe:
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    # Start-up ----------------------------------------------------------------------------

    def replay(self) -> None:
        """Rebuild the image from the records file, dropping a torn final line (once: brokers
        sharing this controller may each call it)."""
        if self._replayed:
            return
        self._replayed = True
        self.dir.mkdir(parents=True, exist_ok=True)
        records: list[Record] = []
        if self.path.exists():
            records, good_bytes = read_records_file(self.path)
            if good_bytes != self.path.stat().st_size:
                with open(self.path, "r+b") as fh:
                    fh.truncate(good_bytes)
        self._set_image(self.image.apply(records))

    # Broker lifecycle --------------------------------------------------------------------

    async def register_broker(
        self, broker_id: int, incarnation_id: str, endpoints: Sequence[Endpoint], rack: str | None
    ) -> int:
        async with self._lock:
            await self.commit(partition_ops.register_broker(
                self.image, broker_id, incarnation_id, endpoints, rack,
                unclean_default=self.unclean_leader_election))
            self.last_heartbeat[broker_id] = asyncio.get_running_loop().time()
            return self.image.brokers[broker_id].epoch

    async def heartbeat(
        self, broker_id: int, broker_epoch: int, *, want_fence: bool = False, want_shutdown: bool = False
    ) -> HeartbeatResult:
        received = asyncio.get_running_loop().time()
        async with self._lock:
            broker = self.image.brokers.get(broker_id)
            if broker is None or broker.epoch != broker_epoch:
                return HeartbeatResult(ErrorCode.STALE_BROKER_EPOCH, True)
            # When it arrived, not when the lock came free: a slow commit ahead of it must not
            # make a live broker look silent.
            self.last_heartbeat[broker_id] = max(received, self.last_heartbeat.get(broker_id, received))
            if want_shutdown or want_fence:
                await self.commit(partition_ops.fence_broker(self.image, broker_id,
                                                             unclean_default=self.unclean_leader_election))
                return HeartbeatResult(ErrorCode.NONE, True, want_shutdown)
            if broker.fenced:
                await self.commit(partition_ops.unfence_broker(self.image, broker_id,
                                                               unclean_default=self.unclean_leader_election))
            return HeartbeatResult(ErrorCode.NONE, self.image.brokers[broker_id].fenced)

    async def fence_broker(self, broker_id: int) -> None:
        async with self._lock:
            await self.commit(partition_ops.fence_broker(self.image, broker_id,
                                                         unclean_default=self.unclean_leader_election))

    def excuse_stall(self, seconds: float) -> None:
        """The event loop was blocked for ``seconds`` (a large metadata change applied at once):
        no heartbeat could be read meanwhile, so that time does not count as any broker's silence.
        Without this a co-located broker was fenced by its own controller after every stall."""
        for broker_id in self.last_heartbeat:
            self.last_heartbeat[broker_id] += seconds

    async def fence_expired(self, session_timeout_ms: int) -> list[int]:
        """Fence live brokers whose last heartbeat is older than the session timeout (Kafka's
        ``broker.session.timeout.ms``); returns their ids. Whoever owns the controller calls it
        periodically; in-process tests fence explicitly instead."""
        loop = asyncio.get_running_loop()

        def silent(broker_id: int) -> bool:
            now = loop.time()
            return now - self.last_heartbeat.get(broker_id, now) > session_timeout_ms / 1000

        fenced = []
        for broker_id in [b for b in sorted(self.image.live_broker_ids()) if silent(b)]:
            async with self._lock:
                # Checked again under the lock: a heartbeat may have come in while it was held.
                broker = self.image.brokers.get(broker_id)
                if broker is None or broker.fenced or not silent(broker_id):
                    continue
                log.warning("fencing broker %d: no heartbeat for %d ms", broker_id, session_timeout_ms)
                await self.commit(partition_ops.fence_broker(self.image, broker_id,
                                                             unclean_default=self.unclean_leader_election))
                fenced.append(broker_id)
        return fenced

    # Partitions ---------------------------------------------------------------------------

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, requests: Sequence[AlterPartitionRequest]
    ) -> AlterPartitionOutcome:
        async with self._lock:
            outcome = partition_ops.alter_partition(self.image, broker_id, broker_epoch, requests,
                                                    unclean_default=self.unclean_leader_election)
            await self.commit(outcome.records)
            return outcome

    async def elect_leaders(self, items: Sequence[tuple[str, int]], election_type: int) -> list[ElectionOutcome]:
        async with self._lock:
            outcomes: list[ElectionOutcome] = []
            for topic, partition in items:
                outcome = partition_ops.elect_leaders(self.image, topic, partition, election_type)
                await self.commit(outcome.records)
                outcomes.append(outcome)
            return outcomes

    async def alter_partition_reassignments(
        self, items: Sequence[ReassignmentItem], *, allow_replication_factor_change: bool = True
    ) -> list[ReassignmentResult]:
        async with self._lock:
            outcome = reassignment.alter_partition_reassignments(
                self.image, items, allow_replication_factor_change=allow_replication_factor_change,
                unclean_default=self.unclean_leader_election)
            await self.commit(outcome.records)
            return outcome.results

    async def list_partition_reassignments(
        self, wanted: Sequence[tuple[str, Sequence[int]]] | None = None
    ) -> list[OngoingReassignment]:
        return reassignment.list_partition_reassignments(self.image, wanted)

    async def balance_leaders(self, imbalance_percentage: int) -> int:
        """One automatic leader rebalance pass (see ``leader_balance``); returns how many
        partitions changed leader. Whoever runs the controller calls it periodically."""
        async with self._lock:
            records = leader_balance.preferred_leader_elections(self.image, imbalance_percentage)
            if records:
                log.info("leader rebalance: moving %d partition(s) back to their preferred leader", len(records))
            await self.commit(records)
            return len(records)

    # Committing --------------------------------------------------------------------------

    async def commit(self, records: Sequence[Record]) -> None:
        if not records:
            return
        data = b"".join(json.dumps(to_json(r), separators=(",", ":")).encode() + b"\n" for r in records)
        await asyncio.get_running_loop().run_in_executor(None, self._append_durably, data)
        self._set_image(self.image.apply(records))

    def _append_durably(self, data: bytes) -> None:
        with open(self.path, "ab") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    def _set_image(self, new: MetadataImage) -> None:
        old, self.image = self.image, new
        for listener in list(self._listeners):
            try:
                listener(old, new)
            except Exception:
                # One broker's failure to apply an image must not fail the commit for the others
                # (or the request that committed it): the records are durable already.
                log.exception("an image listener failed")

    # Admin operations --------------------------------------------------------------------

    async def create_topics(
        self, requests: Sequence[NewTopic], *, validate_only: bool, default_partitions: int,
        default_replication: int,
    ) -> list[Outcome]:
        if requested_partitions(requests, default_partitions) > MAX_PARTITIONS_PER_REQUEST:
            # The whole request is refused, every topic with the same error (as Kafka does).
            return [Outcome(ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS) for _ in requests]
        async with self._lock:
            outcomes: list[Outcome] = []
            image = self.image
            to_commit: list[Record] = []
            records = 0  # validate-only requests count them too, as Kafka's do
            for req in requests:
                outcome = create_topic(image, req, default_partitions=default_partitions,
                                       default_replication=default_replication,
                                       start_index=self._placement_start)
                self._placement_start += 1
                records += len(outcome.records)
                if records > MAX_RECORDS_PER_REQUEST:
                    # Kafka fails the whole request then, every topic with the same error.
                    return [Outcome(ErrorCode.POLICY_VIOLATION, TOO_MANY_RECORDS) for _ in requests]
                if not outcome.error and not validate_only:
                    to_commit.extend(outcome.records)
                    image = image.apply(outcome.records)  # later items see earlier ones
                outcomes.append(outcome)
            await self.commit(to_commit)
            return outcomes

    async def delete_topics(self, items: Sequence[tuple[str | None, uuid.UUID | None]]) -> list[Outcome]:
        async with self._lock:
            outcomes = [delete_topic(self.image, name, topic_id) for name, topic_id in items]
            await self.commit([r for o in outcomes for r in o.records])
            return outcomes

    async def create_partitions(
        self, items: Sequence[tuple[str, int, Sequence[Sequence[int]] | None]], *, validate_only: bool
    ) -> list[Outcome]:
        async with self._lock:
            outcomes = [create_partitions(self.image, name, count, assign) for name, count, assign in items]
            if not validate_only:
                await self.commit([r for o in outcomes for r in o.records])
            return outcomes

    async def alter_topic_configs(
        self, name: str, values: Mapping[str, str | None], *, replace_all: bool, validate_only: bool
    ) -> Outcome:
        async with self._lock:
            outcome = alter_topic_configs(self.image, name, values, replace_all=replace_all)
            if not outcome.error and not validate_only:
                await self.commit(outcome.records)
            return outcome

    async def alter_group_configs(
        self, name: str, values: Mapping[str, str | None], *, replace_all: bool, validate_only: bool,
        limits: Mapping[str, str],
    ) -> Outcome:
        async with self._lock:
            outcome = alter_group_configs(self.image, name, values, replace_all=replace_all, limits=limits)
            if not outcome.error and not validate_only:
                await self.commit(outcome.records)
            return outcome

    async def update_features(self, updates: Sequence[FeatureUpdate], *, validate_only: bool) -> list[FeatureOutcome]:
        async with self._lock:
            outcomes, records = update_features(self.image, updates)
            if records and not validate_only:
                await self.commit(list(records))
            return outcomes

    async def alter_user_scram_credentials(self, deletions: Sequence[ScramDeletion],
                                           upsertions: Sequence[ScramUpsertion]) -> list[UserOutcome]:
        async with self._lock:
            outcomes, records = alter_credentials(self.image, deletions, upsertions)
            if records:
                await self.commit(list(records))
            return outcomes

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[AclCreation]:
        async with self._lock:
            outcomes, records = create_acls(self.image, bindings, uuid.uuid4)
            if records:
                await self.commit(list(records))
            return outcomes

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[AclDeletion]:
        async with self._lock:
            outcomes, records = delete_acls(self.image, filters)
            if records:
                await self.commit(list(records))
            return outcomes

    async def alter_client_quotas(self, alterations: Sequence[QuotaAlteration], *,
                                  validate_only: bool) -> list[QuotaOutcome]:
        async with self._lock:
            outcomes, records = alter_quotas(self.image, alterations)
            if records and not validate_only:
                await self.commit(list(records))
            return outcomes

    async def allocate_producer_id(self, broker_id: int) -> int:
        """Producer ids come from blocks recorded in the metadata log, so they never repeat."""
        async with self._lock:
            if self._next_pid == 0 or self._next_pid >= self._pid_block_end:
                start = self.image.next_producer_id
                await self.commit([ProducerIdsRecord(broker_id, start + PRODUCER_ID_BLOCK)])
                self._next_pid, self._pid_block_end = start, start + PRODUCER_ID_BLOCK
            pid = self._next_pid
            self._next_pid += 1
            return pid
