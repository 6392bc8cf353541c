"""An asyncio loop around one :class:`RaftNode`: clock, disk and network for the pure core.

The loop ticks the node every ``tick_ms``, steps inbound messages, and handles each Ready as the
contract in ``docs/raft.md`` demands: persist (fsync in a worker thread, so the event loop keeps
serving) *before* sending the Ready's messages, then apply ``restore`` and ``committed`` and
resolve the proposals that committed. Readys are handled strictly one after another; inputs that
arrive during a persist wait in the inbox (no pipelining: simple, and fast enough for metadata).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from ..raft import (
    Entry,
    Message,
    NotLeaderError,
    RaftConfig,
    RaftError,
    RaftNode,
    Ready,
    Role,
    Snapshot,
)
from .storage import QuorumStorage

log = logging.getLogger(__name__)

# apply(entries, restore): when ``restore`` is set, reset the state machine to ``restore.data``
# first; then apply ``entries`` in order (control entries are already filtered out). Called for
# every Ready that commits anything, so ``entries`` may be empty.
ApplyFn = Callable[[list[Entry], Snapshot | None], None]


class Transport(abc.ABC):
    """Carries messages to other nodes. Losing, duplicating or delaying some is fine (the core
    retries and deduplicates); inbound messages are handed to ``RaftDriver.deliver``."""

    @abc.abstractmethod
    def send(self, msg: Message) -> None:
        """Queue ``msg`` for ``msg.dst``; must not block."""


class LeadershipLostError(RaftError):
    """The node stopped leading (or stopped) before a proposal committed: its outcome is unknown,
    as in KRaft; it may still commit under the next leader."""


class RaftDriver:
    def __init__(
        self,
        node_id: int,
        voters: Iterable[int],
        storage: QuorumStorage,
        transport: Transport,
        apply: ApplyFn,
        config: RaftConfig | None = None,
        *,
        tick_ms: int = 20,
        rng: random.Random | None = None,
    ) -> None:
        self.node_id = node_id
        self._voters = frozenset(voters)
        self._storage = storage
        self._transport = transport
        self._apply = apply
        self._config = config
        self._tick_ms = tick_ms
        self._rng = rng
        self._node: RaftNode | None = None
        self._inbox: list[Message] = []
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._t0 = time.monotonic()
        # last offset of a proposal -> (epoch it was proposed in, future resolved with the offset)
        self._pending: dict[int, tuple[int, asyncio.Future[int]]] = {}
        # Set (and replaced) whenever role, epoch or leader changes: callers waiting on another
        # node's answer give up when that node may no longer be the one to ask.
        self._soft_changed = asyncio.Event()
        self.failure: BaseException | None = None
        # The metadata log's reads and fsyncs get a thread of their own: in asyncio's shared
        # default pool they could wait behind unrelated blocking work (log flushes, a client's
        # stalled send), and every controller decision waits for them.
        self._disk: ThreadPoolExecutor | None = None

    # Life cycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the node's directory and start the loop. The state machine is reset to the loaded
        snapshot (``apply([], snapshot)``) before anything else is applied."""
        loop = asyncio.get_running_loop()
        self._disk = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"raft-storage-{self.node_id}")
        stored = await loop.run_in_executor(self._disk, self._storage.load)
        self._node = RaftNode(self.node_id, self._voters, stored, self._config, self._rng, self._now_ms())
        if stored.snapshot is not None:
            self._apply([], stored.snapshot)
        self._task = asyncio.create_task(self._run(), name=f"raft-driver-{self.node_id}")

    async def stop(self) -> None:
        """Stop after the Ready being handled (if any) is fully persisted; close the storage.
        Pending proposals fail with :class:`LeadershipLostError`."""
        self._stopping = True
        self._wakeup.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
            self._task = None
        self._fail_pending("driver stopped")
        self._storage.close()
        if self._disk is not None:
            self._disk.shutdown(wait=False)  # the loop above finished its last persist
            self._disk = None

    # Inputs ------------------------------------------------------------------------------

    def deliver(self, msg: Message) -> None:
        """Hand an inbound message to the node (called by the transport, on the event loop)."""
        if self._stopping or msg.dst != self.node_id:
            return
        self._inbox.append(msg)
        self._wakeup.set()

    async def propose(self, data: bytes) -> int:
        """Append ``data`` and wait until it is committed and applied here; returns its offset.

        Raises :class:`NotLeaderError` at once on a node that is not the leader, and
        :class:`LeadershipLostError` if leadership is lost before the entry commits."""
        node = self._require_node()
        if self._stopping:
            raise LeadershipLostError("driver stopped")
        offset = node.propose([data])  # raises NotLeaderError
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending[offset] = (node.epoch, fut)
        self._wakeup.set()
        return await fut

    def take_snapshot(self, end_offset: int, data: bytes) -> Snapshot | None:
        """The application's state after applying everything below ``end_offset``; it is
        persisted and the log compacted with the next Ready."""
        snap = self._require_node().take_snapshot(end_offset, data)
        self._wakeup.set()
        return snap

    def resign(self) -> bool:
        resigned = self._require_node().resign()
        self._wakeup.set()
        return resigned

    # Views -------------------------------------------------------------------------------

    @property
    def node(self) -> RaftNode:
        return self._require_node()

    @property
    def leader_id(self) -> int | None:
        node = self._node
        return None if node is None else node.soft_state.leader_id

    @property
    def is_leader(self) -> bool:
        return self._node is not None and self._node.is_leader and not self._stopping

    @property
    def epoch(self) -> int:
        return self._require_node().epoch

    def soft_state_changed(self) -> asyncio.Event:
        """An event set at the next change of role, epoch or known leader."""
        return self._soft_changed

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    # The loop ----------------------------------------------------------------------------

    async def _run(self) -> None:
        node = self._require_node()
        loop = asyncio.get_running_loop()
        next_tick = self._now_ms()
        try:
            while not self._stopping:
                timeout = max(0.0, (next_tick - self._now_ms()) / 1000)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), timeout)
                self._wakeup.clear()
                if self._stopping:
                    break
                inbox, self._inbox = self._inbox, []
                for msg in inbox:
                    node.step(msg)
                now = self._now_ms()
                if now >= next_tick:
                    node.tick(now)
                    next_tick = now + self._tick_ms
                while node.has_ready() and not self._stopping:
                    ready = node.ready()
                    if ready.must_persist:
                        await loop.run_in_executor(self._disk, self._storage.persist, ready)
                    self._act(ready)
        except Exception as e:
            # SafetyError (or a disk error): the node must not go on. Proposals fail; the owner
            # sees ``failure`` and decides (the controller process would exit).
            log.exception("raft driver of node %d failed", self.node_id)
            self.failure = e
            self._stopping = True
            self._fail_pending(f"driver failed: {e}")
            raise

    def _act(self, ready: Ready) -> None:
        """Everything after the persist: messages out, state machine, proposal outcomes."""
        for msg in ready.messages:
            try:
                self._transport.send(msg)
            except Exception:  # a lost message is fine, the core retries
                log.warning("raft node %d could not send %r", self.node_id, msg, exc_info=True)
        entries = [e for e in ready.committed if not e.control]
        if ready.restore is not None or ready.committed:
            # Also for control entries alone: the state machine may track how far the log is
            # applied (``node.applied_offset``), e.g. a new leader waiting for its epoch's start.
            self._apply(entries, ready.restore)
        for entry in ready.committed:
            pending = self._pending.pop(entry.offset, None)
            if pending is None:
                continue
            epoch, fut = pending
            if fut.done():
                continue
            if entry.epoch == epoch:
                fut.set_result(entry.offset)
            else:
                # Another leader's entry took the offset: ours was truncated away.
                fut.set_exception(LeadershipLostError(f"offset {entry.offset} went to epoch {entry.epoch}"))
        soft = ready.soft_state
        if soft is not None:
            self._soft_changed.set()
            self._soft_changed = asyncio.Event()
        if soft is not None and self._pending:
            # Proposals of an epoch this node no longer leads have an unknown outcome.
            lost = [o for o, (ep, _) in self._pending.items() if soft.role is not Role.LEADER or ep != soft.epoch]
            for offset in lost:
                _, fut = self._pending.pop(offset)
                if not fut.done():
                    fut.set_exception(LeadershipLostError(f"leadership lost in epoch {soft.epoch}"))

    # Helpers -----------------------------------------------------------------------------

    def _fail_pending(self, reason: str) -> None:
        pending, self._pending = self._pending, {}
        for _, fut in pending.values():
            if not fut.done():
                fut.set_exception(LeadershipLostError(reason))

    def _now_ms(self) -> int:
        return int((time.monotonic() - self._t0) * 1000)

    def _require_node(self) -> RaftNode:
        if self._node is None:
            raise RaftError("driver not started")
        return self._node


__all__ = ["ApplyFn", "LeadershipLostError", "NotLeaderError", "RaftDriver", "Transport"]
