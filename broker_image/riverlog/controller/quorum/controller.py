"""The quorum controller: ``ControllerApi`` on a node of a Raft metadata quorum (KRaft-style).

Every node keeps a replica of the metadata log (``__cluster_metadata-0``) through its
:class:`RaftDriver`: voters take part in elections, other brokers follow as observers. Committed
entries (one JSON batch of records each, see ``codec.py``) are applied to this node's
``MetadataImage``, which the broker serves Metadata from and its replica manager follows.

Decisions are made only by the *active controller*: the Raft leader, once it has applied
everything committed before its epoch (a new leader must not decide from a stale image). It runs
the same code as the single-node ``LocalController`` (which this class extends); only
``commit`` differs: records are proposed to the quorum and the call returns once they are
committed and applied here. On any other node, a ``ControllerApi`` call is forwarded to the
active controller over the CONTROLLER listener (``messages/controller_call.py``) and returns once
this node's own image has applied the result, so a caller may read ``image`` right after, as with
the local controller. Calls made while there is no active controller (an election, usually a
second or two) wait and retry up to ``CALL_TIMEOUT_S``.

The active controller also fences brokers whose heartbeats stop (``broker.session.timeout.ms``);
a newly elected one first gives every live broker a fresh session, as Kafka's does. A broker
whose heartbeat is late and whose listener refuses connections is fenced at once: its process is
gone (``liveness.py``).

Every node, voter or observer, snapshots its own image (as every KRaft node does): once
``metadata.log.max.record.bytes.between.snapshots`` bytes of records were applied since the last
snapshot, or ``metadata.log.max.snapshot.interval.ms`` after it if anything was, the image is
written as records (``snapshot.image_to_records``) at the offset it was applied up to, and the
Raft core compacts the log below it. A restart then loads the snapshot and replays only the
rest; a replica behind the leader's log start downloads the leader's snapshot (FetchSnapshot).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from ...client.connection import BrokerConnection
from ...config import BrokerConfig, ConfigError, Voter
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from .. import partition_ops
from ..api import HeartbeatResult
from ..image import MetadataImage
from ..leader_balance import LeaderBalanceSettings
from ..local import LocalController
from ..partition_ops import AlterPartitionOutcome, AlterPartitionRequest, ElectionOutcome
from ..raft import Entry, NotLeaderError, RaftConfig, RaftError, Snapshot
from ..reassignment import ReassignmentItem, ReassignmentResult
from ..records import Endpoint, Record
from ..snapshot import image_to_records
from ..topic_ops import NewTopic, Outcome
from . import codec, liveness
from .driver import LeadershipLostError, RaftDriver
from .storage import QuorumStorage
from .transport import Address, RaftTransport

log = logging.getLogger(__name__)

T = TypeVar("T")

CALL_TIMEOUT_S = 15.0  # how long a controller call waits for an active controller
RETRY_BACKOFF_S = 0.05
CATCH_UP_TIMEOUT_S = 5.0
RESIGN_GRACE_S = 0.2  # waiting for this node's image to include a forwarded call's records
SNAPSHOT_CHECK_MAX_S = 1.0  # how often, at most, the time trigger of snapshots is looked at

# The ControllerApi methods a broker may call on the active controller.
FORWARDABLE = frozenset({
    "register_broker", "heartbeat", "fence_broker", "alter_partition", "elect_leaders", "create_topics",
    "delete_topics", "create_partitions", "alter_topic_configs", "allocate_producer_id",
    "alter_partition_reassignments",
})


class _LeaderChangedError(Exception):
    """A forwarded call was abandoned because the Raft leader or epoch changed meanwhile."""


class ControllerUnavailableError(KafkaError):
    code = ErrorCode.NOT_CONTROLLER

    def __init__(self, message: str = "", *, leader_hint: int | None = None) -> None:
        super().__init__(message)
        self.leader_hint = leader_hint  # the leader the refusing voter knows of, if any


def snapshot_settings(config: BrokerConfig) -> tuple[int, int]:
    """(``metadata.log.max.record.bytes.between.snapshots``, ``metadata.log.max.snapshot.interval.ms``),
    checked as Kafka checks them."""
    max_bytes = config.get_int("metadata.log.max.record.bytes.between.snapshots")
    interval_ms = config.get_int("metadata.log.max.snapshot.interval.ms")
    if max_bytes < 1:
        raise ConfigError(f"metadata.log.max.record.bytes.between.snapshots must be at least 1, got {max_bytes}")
    if interval_ms < 0:
        raise ConfigError(f"metadata.log.max.snapshot.interval.ms must be at least 0, got {interval_ms}")
    return max_bytes, interval_ms


def raft_config(config: BrokerConfig) -> RaftConfig:
    request_timeout = config.get_int("controller.quorum.request.timeout.ms")
    fetch_timeout = config.get_int("controller.quorum.fetch.timeout.ms")
    return RaftConfig(
        election_timeout_ms=config.get_int("controller.quorum.election.timeout.ms"),
        fetch_timeout_ms=fetch_timeout,
        # Long polls end well before a request would be re-sent (RaftConfig checks it).
        fetch_max_wait_ms=max(1, min(500, request_timeout // 2, fetch_timeout // 2)),
        request_timeout_ms=request_timeout,
        check_quorum_timeout_ms=fetch_timeout * 3 // 2,
        resign_backoff_ms=config.get_int("controller.quorum.election.backoff.max.ms"),
    )


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
        self.inter_broker_listener = config.get("inter.broker.listener.name")
        # broker id -> the heartbeat time its listener was last probed for (once per late beat)
        self._probed: dict[int, float] = {}
        self._probes: set[asyncio.Task[None]] = set()
        self.leader_balance = LeaderBalanceSettings.from_broker(config)
        rc = raft_config(config)
        self.transport = RaftTransport(
            config.node_id, cluster_id, {v.node_id: Address(v.host, v.port) for v in voters},
            request_timeout_s=rc.request_timeout_ms / 1000, fetch_wait_s=rc.fetch_max_wait_ms / 1000)
        self.driver = RaftDriver(config.node_id, self.voter_ids, QuorumStorage(metadata_dir), self.transport,
                                 self._apply_entries, rc)
        self.transport.driver = self.driver
        self.applied_offset = 0  # metadata log offset below which everything is in ``image``
        self._applied = asyncio.Event()
        self._active_epoch: int | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._calls: dict[int, BrokerConnection] = {}  # leader id -> connection for forwarded calls
        self._leader_hint: int | None = None  # named by a voter that refused a call
        self._unreachable: int | None = None  # the last call target that could not be reached
        self._next_voter = -1
        self.snapshot_max_bytes, self.snapshot_interval_ms = snapshot_settings(config)
        self._bytes_since_snapshot = 0  # record bytes applied since the image last snapshotted
        self._last_snapshot_at = time.monotonic()
        self._snapshot_task: asyncio.Task[None] | None = None
        self._closing = False  # no new snapshot tasks once stopping

    # Life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        await self.driver.start()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._active_loop(), name="controller-active"))
        self._tasks.append(loop.create_task(self._balance_loop(), name="controller-leader-balance"))
        if self.snapshot_interval_ms > 0:
            self._tasks.append(loop.create_task(self._snapshot_timer(), name="controller-snapshot-timer"))

    async def stop(self) -> None:
        """Leave the quorum: a leader resigns first (EndQuorumEpoch), so the other voters elect a
        successor at once instead of after a fetch timeout."""
        self._closing = True
        await self._cancel_tasks()
        if self.driver.running and self.driver.is_leader and self.driver.resign():
            await asyncio.sleep(RESIGN_GRACE_S)  # the driver loop sends EndQuorumEpoch meanwhile
        await self.halt()

    async def halt(self) -> None:
        """Stop without a word to the others (what kill -9 does to the quorum)."""
        self._closing = True
        await self._cancel_tasks()
        await self.transport.close()
        for conn in self._calls.values():
            with contextlib.suppress(Exception):
                await conn.close()
        await self.driver.stop()

    async def _cancel_tasks(self) -> None:
        tasks, self._tasks = self._tasks + list(self._probes), []
        if self._snapshot_task is not None:
            tasks.append(self._snapshot_task)
            self._snapshot_task = None
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
            # The state is a snapshot's again (this node's own at start-up, or the leader's).
            self._bytes_since_snapshot = 0
            self._last_snapshot_at = time.monotonic()
        records: list[Record] = []
        for entry in entries:
            records.extend(codec.decode_records(entry.data))
            self._bytes_since_snapshot += len(entry.data)
        if records or restore is not None:
            self._set_image(image.apply(records))
        self.applied_offset = self.driver.node.applied_offset
        self._applied.set()
        self._applied = asyncio.Event()
        self._maybe_snapshot()

    # Snapshots -----------------------------------------------------------------------------

    def _snapshot_due(self) -> bool:
        if self._bytes_since_snapshot <= 0:
            return False  # nothing applied since the last one
        if self._bytes_since_snapshot >= self.snapshot_max_bytes:
            return True
        elapsed_ms = (time.monotonic() - self._last_snapshot_at) * 1000
        return 0 < self.snapshot_interval_ms <= elapsed_ms

    def _maybe_snapshot(self) -> None:
        """Start a snapshot if one is due and none is being written."""
        if self._closing or self._snapshot_task is not None or not self._snapshot_due() or not self.driver.running:
            return
        # ``image`` holds exactly the entries below ``applied_offset``: both are set together in
        # ``_apply_entries`` with no await between, so this pair is a consistent state.
        image, end_offset = self.image, self.applied_offset
        self._bytes_since_snapshot = 0
        self._last_snapshot_at = time.monotonic()
        self._snapshot_task = asyncio.get_running_loop().create_task(
            self._write_snapshot(image, end_offset), name="controller-snapshot")

    async def _write_snapshot(self, image: MetadataImage, end_offset: int) -> None:
        try:
            # Encoding a large image takes a while: off the event loop (the image is immutable).
            data = await asyncio.get_running_loop().run_in_executor(
                None, lambda: codec.encode_records(image_to_records(image)))
            if not self.driver.running:
                return
            # None: a newer snapshot exists already (one installed from the leader meanwhile).
            snap = self.driver.take_snapshot(end_offset, data)
            if snap is not None:
                log.debug("node %d: metadata snapshot at offset %d (%d bytes)", self.node_id, end_offset, len(data))
        except RaftError as exc:
            log.warning("node %d: no metadata snapshot at offset %d: %s", self.node_id, end_offset, exc)
        except Exception:
            log.exception("node %d: metadata snapshot at offset %d failed", self.node_id, end_offset)
        finally:
            self._snapshot_task = None
        # Records applied while this one was written may have made the next one due already.
        self._maybe_snapshot()

    async def _snapshot_timer(self) -> None:
        """The time trigger (``metadata.log.max.snapshot.interval.ms``) when no entries arrive."""
        period = min(SNAPSHOT_CHECK_MAX_S, self.snapshot_interval_ms / 1000)
        while True:
            await asyncio.sleep(period)
            self._maybe_snapshot()

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

    async def _balance_loop(self) -> None:
        """Automatic leader rebalance (``auto.leader.rebalance.enable``), run by the active
        controller only."""
        settings = self.leader_balance
        if not settings.enabled:
            return
        while True:
            await asyncio.sleep(settings.interval_s)
            if not self.is_active:
                continue
            try:
                await self.balance_leaders(settings.imbalance_percentage)
            except (NotLeaderError, LeadershipLostError):
                pass
            except Exception:
                log.exception("automatic leader rebalance failed; retrying in %gs", settings.interval_s)

    async def _active_loop(self) -> None:
        """While active: fence brokers whose sessions expired. On becoming active: fresh sessions
        for every live broker (their heartbeats went to the previous controller), new producer id
        blocks (the previous controller's may be partly handed out)."""
        loop = asyncio.get_running_loop()
        interval = max(0.05, min(self.session_timeout_ms / 6000, self.heartbeat_interval_ms / 5000))
        while True:
            await asyncio.sleep(interval)
            if not self.is_active:
                self._active_epoch = None
                continue
            epoch = self.driver.epoch
            if self._active_epoch != epoch:
                self._active_epoch = epoch
                now = loop.time()
                self.last_heartbeat = {b: now for b in self.image.brokers}
                self._next_pid = self._pid_block_end = 0
                log.info("node %d is the active controller (epoch %d)", self.node_id, epoch)
                continue
            try:
                await self.fence_expired(self.session_timeout_ms)
            except (NotLeaderError, LeadershipLostError, ControllerUnavailableError):
                pass
            except Exception:
                log.exception("fencing expired brokers failed")
            self._probe_late_brokers()

    def _probe_late_brokers(self) -> None:
        """Probe the listener of every live broker whose heartbeat is overdue (see liveness.py)."""
        now = asyncio.get_running_loop().time()
        late_after = liveness.LATE_HEARTBEATS * self.heartbeat_interval_ms / 1000
        for broker_id in sorted(self.image.live_broker_ids()):
            last = self.last_heartbeat.get(broker_id)
            if broker_id == self.node_id or last is None or now - last < late_after:
                continue
            if self._probed.get(broker_id) == last:
                continue  # probed already since its last heartbeat
            self._probed[broker_id] = last
            task = asyncio.get_running_loop().create_task(self._fence_if_gone(broker_id, last))
            self._probes.add(task)
            task.add_done_callback(self._probes.discard)

    async def _fence_if_gone(self, broker_id: int, last_heartbeat: float) -> None:
        broker = self.image.brokers.get(broker_id)
        address = None if broker is None else liveness.probe_address(broker, self.inter_broker_listener)
        if address is None or not await liveness.nothing_listens(*address):
            return
        try:
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
        except (NotLeaderError, LeadershipLostError):
            pass

    async def _route(self, method: str, local: Callable[[], Awaitable[T]], arguments: Sequence[Any],
                     options: Mapping[str, Any]) -> T:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CALL_TIMEOUT_S
        reason = "no controller elected yet"
        while True:
            if self.is_active:
                try:
                    return await local()
                except (NotLeaderError, LeadershipLostError) as exc:
                    reason = f"leadership moved during the call: {exc}"
            else:
                leader = self._call_target()
                if leader is not None:
                    try:
                        result: T = await self._forward_until_leader_changes(leader, method, arguments, options)
                        self._unreachable = None
                        return result
                    except _LeaderChangedError as exc:
                        # The call may have been lost with an isolated old leader: ask again
                        # at once rather than wait out the request timeout (a broker's
                        # heartbeat stuck there would let the new controller fence it).
                        reason = str(exc)
                        self._leader_hint = None
                        await self._drop_call_connection(leader)
                    except ControllerUnavailableError as exc:
                        reason = str(exc)
                        self._leader_hint = exc.leader_hint
                    except Exception as exc:  # connection errors: the leader may be gone
                        reason = f"controller {leader} unreachable: {exc}"
                        await self._drop_call_connection(leader)
                        # Ask another voter next: it names the new leader (an observer learns
                        # of a new leader only when its own metadata fetch fails over).
                        self._leader_hint = None
                        self._unreachable = leader
            if loop.time() >= deadline:
                raise ControllerUnavailableError(
                    f"{method}: no active controller within {CALL_TIMEOUT_S:g}s ({reason})")
            await asyncio.sleep(RETRY_BACKOFF_S)

    def _call_target(self) -> int | None:
        """Where to send a controller call: the leader a voter named in its last refusal, else
        the Raft leader this node knows, else (that one unreachable) the next other voter."""
        voters = self.transport.voters
        hint = self._leader_hint
        if hint is not None and hint != self.node_id and hint in voters:
            return hint
        leader = self.driver.leader_id if self.driver.running else None
        if leader is not None and leader != self.node_id and leader in voters and leader != self._unreachable:
            return leader
        others = sorted(v for v in voters if v != self.node_id and v != self._unreachable)
        if not others:
            return None
        self._next_voter = (self._next_voter + 1) % len(others)
        return others[self._next_voter]

    async def _forward_until_leader_changes(
        self, leader: int, method: str, arguments: Sequence[Any], options: Mapping[str, Any]
    ) -> Any:
        """``_forward``, abandoned when this node learns that another node leads the quorum."""
        call = asyncio.ensure_future(self._forward(leader, method, arguments, options))
        try:
            while not call.done():
                changed = asyncio.ensure_future(self.driver.soft_state_changed().wait())
                try:
                    await asyncio.wait({call, changed}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    changed.cancel()
                elected = self.driver.leader_id
                if not call.done() and elected is not None and elected != leader:
                    break
            if call.done():
                return call.result()
        finally:
            if not call.done():
                call.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await call
        raise _LeaderChangedError(f"the quorum moved on while {method} waited for node {leader}")

    async def _forward(self, leader: int, method: str, arguments: Sequence[Any], options: Mapping[str, Any]) -> Any:
        conn = self._calls.get(leader)
        if conn is None or conn.closed:
            address = self.transport.voters[leader]
            conn = await BrokerConnection.connect(
                address.host, address.port, client_id=f"controller-call-{self.node_id}",
                connect_timeout=2.0, request_timeout=CALL_TIMEOUT_S, negotiate=False)
            self._calls[leader] = conn
        body = {"cluster_id": self.image.cluster_id, "caller_id": self.node_id, "method": method,
                "arguments": codec.to_wire({"args": tuple(arguments), "kwargs": dict(options)})}
        response = await conn.request(ApiKey.RIVERLOG_CONTROLLER_CALL, body, 0, timeout=CALL_TIMEOUT_S)
        error = ErrorCode(response["error_code"])
        if error == ErrorCode.NOT_CONTROLLER:
            hint = response.get("leader_id", -1)
            raise ControllerUnavailableError(response.get("error_message") or f"node {leader} is not the controller",
                                             leader_hint=hint if hint >= 0 and hint != leader else None)
        if error != ErrorCode.NONE:
            raise KafkaError(response.get("error_message") or error.name, error)
        if not await self.wait_applied(response["metadata_offset"], CATCH_UP_TIMEOUT_S):
            log.warning("node %d: metadata still behind offset %d after %s; going on", self.node_id,
                        response["metadata_offset"], method)
        return codec.from_wire(response["result"])

    async def _drop_call_connection(self, leader: int) -> None:
        conn = self._calls.pop(leader, None)
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

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
        return await self._route("register_broker", lambda: super(QuorumController, self).register_broker(*args),
                                 args, {})

    async def heartbeat(
        self, broker_id: int, broker_epoch: int, *, want_fence: bool = False, want_shutdown: bool = False
    ) -> HeartbeatResult:
        opts = {"want_fence": want_fence, "want_shutdown": want_shutdown}
        return await self._route(
            "heartbeat", lambda: super(QuorumController, self).heartbeat(broker_id, broker_epoch, **opts),
            (broker_id, broker_epoch), opts)

    async def fence_broker(self, broker_id: int) -> None:
        await self._route("fence_broker", lambda: super(QuorumController, self).fence_broker(broker_id),
                          (broker_id,), {})

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, requests: Sequence[AlterPartitionRequest]
    ) -> AlterPartitionOutcome:
        args = (broker_id, broker_epoch, list(requests))
        return await self._route("alter_partition", lambda: super(QuorumController, self).alter_partition(*args),
                                 args, {})

    async def elect_leaders(self, items: Sequence[tuple[str, int]], election_type: int) -> list[ElectionOutcome]:
        pairs = [(topic, partition) for topic, partition in items]
        return await self._route(
            "elect_leaders", lambda: super(QuorumController, self).elect_leaders(pairs, election_type),
            (pairs, election_type), {})

    async def create_topics(
        self, requests: Sequence[NewTopic], *, validate_only: bool, default_partitions: int,
        default_replication: int,
    ) -> list[Outcome]:
        opts = {"validate_only": validate_only, "default_partitions": default_partitions,
                "default_replication": default_replication}
        return await self._route(
            "create_topics", lambda: super(QuorumController, self).create_topics(
                requests, validate_only=validate_only, default_partitions=default_partitions,
                default_replication=default_replication),
            (list(requests),), opts)

    async def delete_topics(self, items: Sequence[tuple[str | None, uuid.UUID | None]]) -> list[Outcome]:
        pairs = [(name, topic_id) for name, topic_id in items]
        return await self._route("delete_topics", lambda: super(QuorumController, self).delete_topics(pairs),
                                 (pairs,), {})

    async def create_partitions(
        self, items: Sequence[tuple[str, int, Sequence[Sequence[int]] | None]], *, validate_only: bool
    ) -> list[Outcome]:
        triples = [(name, count, assignments) for name, count, assignments in items]
        return await self._route(
            "create_partitions",
            lambda: super(QuorumController, self).create_partitions(triples, validate_only=validate_only),
            (triples,), {"validate_only": validate_only})

    async def alter_topic_configs(
        self, name: str, values: Mapping[str, str | None], *, replace_all: bool, validate_only: bool
    ) -> Outcome:
        opts = {"replace_all": replace_all, "validate_only": validate_only}
        return await self._route(
            "alter_topic_configs",
            lambda: super(QuorumController, self).alter_topic_configs(name, dict(values), **opts),
            (name, dict(values)), opts)

    async def alter_partition_reassignments(
        self, items: Sequence[ReassignmentItem], *, allow_replication_factor_change: bool = True
    ) -> list[ReassignmentResult]:
        triples = [(topic, partition, None if replicas is None else list(replicas))
                   for topic, partition, replicas in items]
        opts = {"allow_replication_factor_change": allow_replication_factor_change}
        return await self._route(
            "alter_partition_reassignments",
            lambda: super(QuorumController, self).alter_partition_reassignments(
                triples, allow_replication_factor_change=allow_replication_factor_change),
            (triples,), opts)

    async def allocate_producer_id(self, broker_id: int) -> int:
        return await self._route(
            "allocate_producer_id", lambda: super(QuorumController, self).allocate_producer_id(broker_id),
            (broker_id,), {})


__all__ = ["ControllerUnavailableError", "QuorumController", "raft_config", "snapshot_settings"]
