"""A partition replica on this broker: its log plus the replication state around it.

As leader it appends, tracks every follower's fetch position, keeps the high watermark (the
offset every in-sync replica has reached), resolves acks=all waiters when the high watermark
passes their batch, and decides which ISR changes to propose (the controller commits them). As
follower it is only a log the replica fetcher appends to; its high watermark is the leader's.

High watermark and ISR changes follow Kafka:

- The high watermark is the minimum log end offset over the *maximal* ISR: the committed ISR
  plus any member a pending expansion adds (a pending shrink removes no one until committed,
  because until then the controller may still elect any committed member), plus followers that
  are caught up and eligible, so a catching-up follower can reach it and join.
- A follower is caught up at time T if it had fetched everything the leader had at T; it is
  out of sync once it has not been caught up for ``replica.lag.time.max.ms``.
- A follower joins the ISR once its log end reaches the high watermark and the start of the
  current leader epoch (it then holds every committed record and nothing the new leader
  replaced).
- acks=all needs ``min(min.insync.replicas, replication factor)`` replicas in the committed ISR
  before the append (NOT_ENOUGH_REPLICAS) and when the high watermark passes the batch
  (NOT_ENOUGH_REPLICAS_AFTER_APPEND); the cap at the replication factor is KIP-966's.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from ..protocol.errors import ErrorCode, KafkaError
from ..storage import AppendInfo, Log, ReadInfo

UNKNOWN_OFFSET = -1
_MIN_PRUNE_AT = 16  # waiters kept before cancelled ones are looked for


@dataclass
class ReplicaState:
    """What the leader knows of one follower, from its fetch requests."""

    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    # The leader's log end offset and the time when the follower's previous fetch was served:
    # reaching that offset now means the follower was caught up at that time.
    last_fetch_leader_leo: int = UNKNOWN_OFFSET
    last_fetch_ms: int = 0
    broker_epoch: int = -1  # from the fetch's replica state (KIP-903)

    def record_fetch(self, fetch_offset: int, leader_leo: int, now_ms: int, broker_epoch: int) -> None:
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_leo >= 0:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_ms = now_ms
        if broker_epoch >= 0:
            self.broker_epoch = broker_epoch

    def caught_up(self, leader_leo: int, now_ms: int, max_lag_ms: int) -> bool:
        return self.log_end_offset == leader_leo or now_ms - self.last_caught_up_ms <= max_lag_ms


@dataclass
class Partition:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: Log
    node_id: int
    leader: int = -1
    leader_epoch: int = 0
    partition_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    min_insync_replicas: int = 1
    followers: dict[int, ReplicaState] = field(default_factory=dict)
    # The ISR proposed to the controller and not answered yet (leader only).
    pending_isr: tuple[int, ...] | None = None
    leader_epoch_start_offset: int = 0
    next_isr_proposal_ms: int = 0  # after a refused proposal, wait before proposing again
    # Replicas that may not join the ISR now (fenced or unregistered brokers), kept current by
    # the replica manager: they must not hold the high watermark back either.
    ineligible: frozenset[int] = frozenset()
    replica_lag_time_max_ms: int = 30_000
    flush_pending: bool = False
    # Its log directory is offline (a disk error): KAFKA_STORAGE_ERROR until the broker restarts.
    offline: bool = False
    # Futures resolved when the high watermark moves (acks=all) or data arrives (fetch waits).
    _hw_waiters: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list)
    _data_waiters: list[asyncio.Future[None]] = field(default_factory=list)
    _prune_at: int = 16
    # KIP-890 verification guards (Kafka's VerificationGuard), per producer id: (epoch, version
    # 2?, guard), set before the leader asks the coordinator whether the producer's transaction
    # includes this partition (or has it added), dropped by a marker for the producer. An append
    # that follows the answer needs its guard still there: a marker written meanwhile ended that
    # transaction, and the batch would open a transaction nobody ends. A version 2 producer's next
    # transaction runs at the epoch the last one's markers carry, so such a marker leaves the
    # guard of that epoch alone (Kafka's "next transaction started" exception).
    _txn_verifications: dict[int, tuple[int, bool, object]] = field(default_factory=dict)

    @property
    def is_leader(self) -> bool:
        return self.leader == self.node_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is complete and replicated: what read_committed reads."""
        return self.log.last_stable_offset()

    @property
    def effective_min_isr(self) -> int:
        # KIP-966 (Kafka 4.x): capped at the replication factor, so an RF=1 topic with
        # min.insync.replicas=2 still accepts acks=all, as Kafka does.
        return min(self.min_insync_replicas, max(1, len(self.replicas)))

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending_isr is None:
            return self.isr
        return self.isr + tuple(r for r in self.pending_isr if r not in self.isr)

    # Role changes ------------------------------------------------------------------------

    def become_leader(self, leader_epoch: int, replicas: tuple[int, ...], isr: tuple[int, ...], *,
                      partition_epoch: int = 0, now_ms: int = 0) -> None:
        """Lead a new epoch: record where it starts, forget what earlier leaderships knew."""
        if leader_epoch > self.log.latest_epoch():
            self.log.assign_epoch(leader_epoch, self.log.log_end_offset)
        self.leader = self.node_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = replicas
        self.isr = isr
        self.pending_isr = None
        self.leader_epoch_start_offset = self.log.log_end_offset
        # Followers' positions are unknown until they fetch from us: the high watermark cannot
        # move before every ISR member did (or left the ISR). ISR members count as caught up
        # now, so they get a full lag period to show up.
        self.followers = {
            r: ReplicaState(last_caught_up_ms=now_ms if r in isr else 0)
            for r in replicas if r != self.node_id
        }
        self._maybe_advance_hw(now_ms)

    def update_assignment(self, partition_epoch: int, replicas: tuple[int, ...], isr: tuple[int, ...],
                          now_ms: int) -> None:
        """A committed ISR or replica change within this leader epoch (ours or reassignment)."""
        if partition_epoch < self.partition_epoch:
            return  # already applied from the AlterPartition response
        self.partition_epoch = partition_epoch
        self.replicas = replicas
        self.isr = isr
        if self.pending_isr == isr:
            self.pending_isr = None
        for r in replicas:
            if r != self.node_id and r not in self.followers:
                self.followers[r] = ReplicaState()
        for r in list(self.followers):
            if r not in replicas:
                del self.followers[r]
        if self.is_leader:
            self._maybe_advance_hw(now_ms)
            self._resolve_hw_waiters()

    def become_follower(self, leader: int, leader_epoch: int, partition_epoch: int, replicas: tuple[int, ...],
                        isr: tuple[int, ...]) -> None:
        if self.is_leader:
            self.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._txn_verifications.clear()
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = replicas
        self.isr = isr
        self.pending_isr = None
        self.followers = {}

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        """Raise the error a client must see when this broker can't serve the partition."""
        if self.offline:
            raise KafkaError(f"the log directory of {self.topic}-{self.index} is offline on this broker",
                             ErrorCode.KAFKA_STORAGE_ERROR)
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise KafkaError("", ErrorCode.FENCED_LEADER_EPOCH)
            if current_leader_epoch > self.leader_epoch:
                raise KafkaError("", ErrorCode.UNKNOWN_LEADER_EPOCH)
        if not self.is_leader:
            raise KafkaError("", ErrorCode.NOT_LEADER_OR_FOLLOWER)

    # Writes ------------------------------------------------------------------------------

    def append(self, records: memoryview, *, acks: int, now_ms: int, from_coordinator: bool = False) -> AppendInfo:
        """Append as leader; ``from_coordinator`` as in :meth:`Log.append_as_leader` (a batch the
        group coordinator writes for a transactional offset commit)."""
        self._check_append(acks)
        info = self.log.append_as_leader(
            records, leader_epoch=self.leader_epoch, now_ms=now_ms, from_coordinator=from_coordinator
        )
        self._after_append(now_ms)
        return info

    def has_open_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Is a transaction of this producer and epoch open here? (Then its coordinator need not
        be asked again before the producer's next transactional write.)"""
        entry = self.log.producers.producers.get(producer_id)
        return entry is not None and entry.epoch == producer_epoch and entry.current_txn_first_offset >= 0

    def start_txn_verification(self, producer_id: int, producer_epoch: int, version_2: bool) -> object:
        """A new guard for the producer's next transactional append here (see above)."""
        guard = object()
        self._txn_verifications[producer_id] = (producer_epoch, version_2, guard)
        return guard

    def txn_verification_holds(self, producer_id: int, guard: object) -> bool:
        held = self._txn_verifications.get(producer_id)
        return held is not None and held[2] is guard

    def _marker_ends_verification(self, producer_id: int, marker_epoch: int) -> None:
        held = self._txn_verifications.get(producer_id)
        if held is not None and not (held[1] and held[0] == marker_epoch):
            del self._txn_verifications[producer_id]

    def append_txn_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, committed: bool,
                          *, now_ms: int, transaction_version: int = 0) -> AppendInfo:
        """Write a transaction marker (WriteTxnMarkers, which Kafka appends with acks=all: the
        caller waits for the high watermark to pass ``last_offset``)."""
        self._marker_ends_verification(producer_id, producer_epoch)
        self._check_append(-1)
        info = self.log.append_txn_marker(
            producer_id=producer_id, producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch,
            committed=committed, leader_epoch=self.leader_epoch, now_ms=now_ms,
            transaction_version=transaction_version,
        )
        self._after_append(now_ms)
        return info

    def _check_append(self, acks: int) -> None:
        self.check_leader()
        if acks == -1 and len(self.isr) < self.effective_min_isr:
            raise KafkaError(
                f"The size of the current ISR {set(self.isr)} is insufficient to satisfy the "
                f"min.isr requirement of {self.min_insync_replicas}",
                ErrorCode.NOT_ENOUGH_REPLICAS,
            )

    def _after_append(self, now_ms: int) -> None:
        self._maybe_advance_hw(now_ms)
        self._wake_data_waiters()  # followers read up to the log end

    def wait_for_high_watermark(self, offset: int) -> asyncio.Future[None]:
        """A future resolved once the high watermark is above ``offset`` (acks=all); it fails
        with NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR is then smaller than min ISR."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._hw_waiters.append((offset, fut))
        self._resolve_hw_waiters()
        return fut

    # Followers (leader side) -------------------------------------------------------------

    def update_follower(self, replica_id: int, fetch_offset: int, broker_epoch: int, now_ms: int) -> None:
        """A follower fetched at ``fetch_offset``: it holds everything below it."""
        state = self.followers.get(replica_id)
        if state is None:
            return
        state.record_fetch(fetch_offset, self.log.log_end_offset, now_ms, broker_epoch)
        self._maybe_advance_hw(now_ms)

    def expansion_candidate(self, replica_id: int) -> bool:
        """Whether ``replica_id`` has caught up enough to join the ISR (Kafka's test)."""
        state = self.followers.get(replica_id)
        if state is None or replica_id in self.isr or not self.is_leader:
            return False
        leo = state.log_end_offset
        return leo >= self.high_watermark and leo >= self.leader_epoch_start_offset

    def out_of_sync_replicas(self, now_ms: int) -> list[int]:
        """ISR followers that have not been caught up for replica.lag.time.max.ms."""
        leo = self.log.log_end_offset
        return [r for r in self.isr if r != self.node_id and r in self.followers
                and not self.followers[r].caught_up(leo, now_ms, self.replica_lag_time_max_ms)]

    def _maybe_advance_hw(self, now_ms: int) -> None:
        if not self.is_leader:
            return
        leo = self.log.log_end_offset
        maximal = self.maximal_isr
        new_hw = leo
        for r, state in self.followers.items():
            # Non-ISR followers that are caught up hold the high watermark back too (KIP-841's
            # eligibility aside): otherwise, under steady load, the high watermark would run
            # ahead of them forever and they could never qualify for the ISR.
            if r in maximal or (state.log_end_offset >= 0 and r not in self.ineligible
                                and state.caught_up(leo, now_ms, self.replica_lag_time_max_ms)):
                new_hw = min(new_hw, state.log_end_offset)
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            self._resolve_hw_waiters()
            self._wake_data_waiters()  # consumers may read up to the new high watermark

    def _resolve_hw_waiters(self) -> None:
        if not self._hw_waiters:
            return
        hw = self.high_watermark
        enough = len(self.isr) >= self.effective_min_isr
        keep: list[tuple[int, asyncio.Future[None]]] = []
        for offset, fut in self._hw_waiters:
            if fut.done():
                continue
            if hw > offset:
                if enough:
                    fut.set_result(None)
                else:
                    fut.set_exception(KafkaError(
                        f"the ISR {set(self.isr)} shrank below min.insync.replicas "
                        f"{self.min_insync_replicas} after the append", ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND))
            else:
                keep.append((offset, fut))
        self._hw_waiters = keep

    # Reads -------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, replica: bool = False, min_one_batch: bool = True,
             read_committed: bool = False, last_stable_offset: int | None = None) -> ReadInfo:
        # Consumers see only committed data (below the high watermark), read_committed ones only
        # data below the last stable offset (``last_stable_offset`` if the caller has it already);
        # followers read to the end. A read_committed fetch waiting for the LSO is woken by what
        # moves it: a marker's append or the high watermark.
        if replica:
            limit = self.log.log_end_offset
        elif read_committed:
            limit = self.last_stable_offset if last_stable_offset is None else last_stable_offset
        else:
            limit = self.high_watermark
        return self.log.read(offset, max_bytes, max_offset=limit, min_one_batch=min_one_batch)

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """Fetch's truncation check (KIP-320/KIP-595): the (epoch, end offset) a follower must
        truncate to if its last fetched epoch ends earlier here, or is unknown; None if its log
        is a prefix of ours."""
        if last_fetched_epoch < 0:
            return None
        epoch, end = self.log.end_offset_for_epoch(last_fetched_epoch)
        if epoch < last_fetched_epoch or end < fetch_offset:
            return epoch, end
        return None

    def data_arrived(self) -> asyncio.Future[None]:
        """A future resolved when records are appended. A fetch that stops waiting cancels it;
        on an idle partition nothing would ever clear it from the list, so cancelled ones are
        dropped whenever the list has doubled (amortised O(1) per wait)."""
        if len(self._data_waiters) >= self._prune_at:
            self._data_waiters = [f for f in self._data_waiters if not f.done()]
            self._prune_at = max(_MIN_PRUNE_AT, 2 * len(self._data_waiters))
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._data_waiters.append(fut)
        return fut

    @property
    def data_waiters_held(self) -> int:
        """Futures held for fetches waiting on this partition (cancelled ones not yet dropped)."""
        return len(self._data_waiters)

    def _wake_data_waiters(self) -> None:
        waiters, self._data_waiters = self._data_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def fail_waiters(self, code: ErrorCode) -> None:
        """Leadership moved or the partition is gone: nobody may wait for this replica any more."""
        for _, fut in self._hw_waiters:
            if not fut.done():
                fut.set_exception(KafkaError("", code))
        self._hw_waiters = []
        self._wake_data_waiters()
