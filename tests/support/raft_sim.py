"""Deterministic simulation of a Raft quorum: simulated clock, network, disks and crashes.

One seed fixes everything (fault schedule, message delays, every node's election timeouts), so a
failing seed replays exactly. The harness plays the driver's part by the book: a node's Ready is
persisted on its simulated disk before its messages are sent and its commits applied, and disks
may lag (Readys queue up, the node keeps running: pipelining). A crash loses the queue, except
that the first queued Ready may be partly written (a torn write of a prefix of its operations).
A restarted node gets only what its disk holds.

Invariants are checked as events happen and at every step (:class:`Checker`):

- election safety: at most one leader per epoch, ever;
- log matching: an entry (offset, epoch) has the same data and the same previous epoch on every
  disk that holds it, which by induction means identical prefixes;
- no loss of committed entries: no node truncates below its own high watermark, and an entry
  any node applied stays on a majority of voters' disks (or in their snapshots);
- leader completeness: a leader of a later epoch than the one that committed an entry holds it;
- state-machine safety: every node applies the same entry at each offset, contiguously, and a
  snapshot it restores equals the state everyone had at that offset;
- bookkeeping: high watermarks never go back, the disk equals the node's log once its Readys are
  written (the Ready contract itself is tested), appends land at the stored log end;
- liveness: after each chaos period the faults heal, and within a bounded number of steps a
  probe proposal is applied by every node.
"""

from __future__ import annotations

import heapq
import json
import random
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from riverlog.controller.raft import (
    Entry,
    HardState,
    Message,
    NotLeaderError,
    RaftConfig,
    RaftNode,
    Ready,
    Role,
    SafetyError,
    Snapshot,
    Storage,
)

NodeFactory = Callable[[int, frozenset[int], Storage, RaftConfig, random.Random, int], RaftNode]

# Short timings so a few thousand 10 ms steps hold many elections; same ratios as the defaults.
SIM_RAFT_CONFIG = RaftConfig(
    election_timeout_ms=150,
    fetch_timeout_ms=300,
    fetch_max_wait_ms=50,
    request_timeout_ms=100,
    check_quorum_timeout_ms=450,
    resign_backoff_ms=20,
    max_fetch_entries=16,
    snapshot_chunk_bytes=64,
    snapshot_trailing_entries=8,
)


class InvariantViolation(AssertionError):
    pass


@dataclass
class SimConfig:
    voters: int = 3
    observers: int = 1
    steps: int = 3000
    step_ms: int = 10
    raft: RaftConfig = SIM_RAFT_CONFIG
    # Chaos periods alternate with calm periods in which faults heal and liveness is checked.
    chaos_steps: tuple[int, int] = (300, 700)
    calm_steps: int = 300
    liveness_steps: int = 250  # a probe must be applied everywhere this many steps into calm
    # Per-step probabilities during chaos.
    crash_prob: float = 0.006
    downtime_steps: tuple[int, int] = (5, 150)
    # A paused process (SIGSTOP): no ticks, no disk, its inbox held; then all at once, and its
    # clock jumps. Clocks also run at slightly different rates per node.
    pause_prob: float = 0.003
    pause_steps: tuple[int, int] = (10, 120)
    clock_skew: float = 0.1
    partition_prob: float = 0.01
    resign_prob: float = 0.002
    propose_prob: float = 0.3
    slow_disk_prob: float = 0.3  # a node's queued Readys wait for a later step
    torn_write_prob: float = 0.5  # on crash, the first queued Ready is partly written
    # Per-message faults during chaos (loss is drawn per seed from this range).
    loss: tuple[float, float] = (0.0, 0.15)
    dup_prob: float = 0.03
    delay_ms: tuple[int, int] = (1, 40)
    calm_delay_ms: tuple[int, int] = (1, 8)
    snapshot_every: tuple[int, int] = (20, 60)  # applied entries between a node's snapshots
    snapshot_pad: int = 150  # bytes of padding, so snapshots take several chunks


class Disk:
    """A node's durable state, changed only by applying Readys in the documented order."""

    def __init__(self) -> None:
        self.hard_state = HardState()
        self.snapshot: Snapshot | None = None
        self.base = 0
        self.entries: list[Entry] = []

    @property
    def end(self) -> int:
        return self.base + len(self.entries)

    def snapshot_covers(self, offset: int) -> bool:
        return self.snapshot is not None and offset < self.snapshot.end_offset

    def epoch_at(self, offset: int) -> int | None:
        if self.base <= offset < self.end:
            return self.entries[offset - self.base].epoch
        if self.snapshot is not None and offset == self.snapshot.end_offset - 1:
            return self.snapshot.epoch
        return 0 if offset == -1 else None

    def write(self, r: Ready, torn: random.Random | None = None) -> list[Entry]:
        """Apply ``r``; with ``torn``, only a random prefix of its operations (a crash mid-write).
        Returns the entries appended."""
        ops = 5
        cut = torn.randrange(ops + 1) if torn is not None else ops
        if cut > 0 and r.hard_state is not None:
            self.hard_state = r.hard_state
        if cut > 1 and r.snapshot is not None:
            self.snapshot = r.snapshot
        if cut > 2 and r.truncate_to is not None and r.truncate_to < self.end:
            del self.entries[max(0, r.truncate_to - self.base) :]
        if cut > 3 and r.log_start is not None:
            drop = r.log_start - self.base
            if drop > 0:
                del self.entries[:drop]
            if drop > 0 or not self.entries:
                self.base = r.log_start
        if cut > 4 and r.entries:
            entries = r.entries
            if torn is not None and cut == ops:
                entries = entries[: torn.randrange(len(entries) + 1)]
            if entries and entries[0].offset != self.end:
                raise InvariantViolation(f"Ready appends at {entries[0].offset}, stored log ends at {self.end}")
            self.entries.extend(entries)
            return entries
        return []

    def storage(self) -> Storage:
        return Storage(self.hard_state, self.snapshot, list(self.entries))

    def copy(self) -> Disk:
        other = Disk()
        other.hard_state, other.snapshot, other.base, other.entries = (
            self.hard_state, self.snapshot, self.base, list(self.entries))
        return other


class App:
    """The replicated state machine: a running CRC of everything applied (cheap to compare)."""

    def __init__(self, snapshot: Snapshot | None) -> None:
        self.next_offset = 0
        self.digest = 0
        self.applied_since_snapshot = 0
        if snapshot is not None:
            self.restore(snapshot)

    def restore(self, snapshot: Snapshot) -> None:
        state = json.loads(snapshot.data)
        self.next_offset = state["end"]
        self.digest = state["digest"]
        self.applied_since_snapshot = 0

    def apply(self, entry: Entry) -> None:
        if not entry.control:
            self.digest = zlib.crc32(entry.data, self.digest)
        self.next_offset = entry.offset + 1
        self.applied_since_snapshot += 1

    def snapshot_data(self, pad: int) -> bytes:
        return json.dumps({"end": self.next_offset, "digest": self.digest, "pad": "x" * pad}).encode()


class SimNode:
    def __init__(self, node_id: int) -> None:
        self.id = node_id
        self.disk = Disk()
        # What the disk will hold once every queued Ready is written: the node's log as told by
        # its Readys alone. Checked against the node's real log, it tests the Ready bookkeeping.
        self.mirror = Disk()
        self.raft: RaftNode | None = None
        self.app = App(None)
        # Readys waiting for the disk, with the node's epoch when it produced each.
        self.pending: deque[tuple[Ready, int]] = deque()
        self.lives = 0
        self.restart_at = 0
        self.paused_until = 0
        self.held: list[Message] = []
        self.clock_rate = 1.0
        self.clock_origin = 0
        self.snapshot_every = 0
        self.last_hw = 0

    @property
    def up(self) -> bool:
        return self.raft is not None


class Checker:
    """Global invariants over everything every node ever said (see the module docstring)."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.leaders: dict[int, int] = {}  # epoch -> leader
        self.entries: dict[tuple[int, int], tuple[bytes, int | None]] = {}  # (offset, epoch) -> (data, prev epoch)
        self.committed: dict[int, Entry] = {}  # offset -> entry, from every node's applies
        # offset -> an epoch >= the one in which the entry was committed: the epoch of the first
        # node that applied it, when it produced that Ready (a follower learns the high
        # watermark only from the leader of its own epoch).
        self.commit_epoch: dict[int, int] = {}
        self.max_committed = -1
        self.digest_at: dict[int, int] = {0: 0}  # end offset -> digest of the state machine

    def fail(self, what: str) -> None:
        raise InvariantViolation(f"seed {self.sim.seed} step {self.sim.step_no} t={self.sim.now}ms: {what}")

    def on_persist(self, node: SimNode, entries: list[Entry]) -> None:
        """Log matching, over what reached a disk. (An entry that was never persisted never left
        its node and dies with it: a node that crashed before persisting its vote for itself
        may legitimately lead that epoch again and write other entries at the same offsets.)"""
        disk = node.disk
        known = self.entries
        for entry in entries:
            prev = disk.epoch_at(entry.offset - 1)
            key = (entry.offset, entry.epoch)
            seen = known.get(key)
            if seen is None:
                known[key] = (entry.data, prev)
            elif seen[0] != entry.data or (prev is not None and seen[1] is not None and prev != seen[1]):
                self.fail(f"log matching: node {node.id} has {key} with prev epoch {prev}, elsewhere {seen[1]}"
                          f" (data equal: {seen[0] == entry.data})")

    # Called with each Ready, right after the node produced it (its in-memory log is current).
    def on_ready(self, node: SimNode, raft: RaftNode, r: Ready) -> None:
        if r.soft_state is not None and r.soft_state.role is Role.LEADER:
            self.on_leader(node, raft)
        if r.truncate_to is not None:
            # Entries below a new log start went into a snapshot (an install discards the whole
            # log): only the ones above it are really removed.
            self._check_truncation(node, raft, max(r.truncate_to, r.log_start or 0))

    def _check_truncation(self, node: SimNode, raft: RaftNode, truncate_to: int) -> None:
        """No committed entry is lost. A node may drop an entry that others committed if it did
        not know (e.g. an observer or lagging voter told by a stale leader of an older epoch
        that its log diverges); but never below its own high watermark, and the entry must stay
        on the disks of a majority of voters (the majority that acknowledged it cannot be told
        to drop it: the leaders they follow afterwards all hold it)."""
        if truncate_to < raft.high_watermark:
            self.fail(f"node {node.id} truncates to {truncate_to}, below its high watermark {raft.high_watermark}")
        mirror = node.mirror  # the node's log is already cut; what it dropped is still here
        majority = len(self.sim.voters) // 2 + 1
        for entry in mirror.entries[max(0, truncate_to - mirror.base) :]:
            c = self.committed.get(entry.offset)
            if c is None or c.epoch != entry.epoch:
                continue
            holders = [
                v for v in self.sim.voters
                if v != node.id and (self.sim.nodes[v].disk.epoch_at(entry.offset) == entry.epoch
                                     or self.sim.nodes[v].disk.snapshot_covers(entry.offset))
            ]
            if len(holders) < majority:
                self.fail(f"node {node.id} drops committed entry {entry.offset} (epoch {entry.epoch}), "
                          f"left on voters {holders} only")

    def on_leader(self, node: SimNode, raft: RaftNode) -> None:
        other = self.leaders.setdefault(raft.epoch, node.id)
        if other != node.id:
            self.fail(f"election safety: nodes {other} and {node.id} both lead epoch {raft.epoch}")
        # Leader completeness: an entry committed in epoch T is in the log of every leader of an
        # epoch after T. (A leader of an older epoch may still be elected late, e.g. a candidate
        # paused with its votes in flight; it cannot commit anything, as the checks show.)
        log = raft.log
        snap = raft.snapshot
        if snap is not None and snap.end_offset > 0:
            c = self.committed.get(snap.end_offset - 1)
            if c is not None and c.epoch != snap.epoch:
                self.fail(f"leader {node.id} (epoch {raft.epoch}) snapshot disagrees with committed entries")
        epoch_bound = self.commit_epoch
        for offset in range(log.start, self.max_committed + 1):
            c = self.committed.get(offset)
            if c is None or epoch_bound[offset] >= raft.epoch:
                continue
            if offset >= log.end or log.entry(offset) != c:
                self.fail(f"leader completeness: leader {node.id} (epoch {raft.epoch}) lacks entry {offset} "
                          f"committed by epoch {epoch_bound[offset]}")

    def on_apply(self, node: SimNode, entry: Entry, epoch: int) -> None:
        if entry.offset != node.app.next_offset:
            self.fail(f"node {node.id} applies {entry.offset}, expected {node.app.next_offset}")
        c = self.committed.setdefault(entry.offset, entry)
        self.commit_epoch.setdefault(entry.offset, epoch)
        if c != entry:
            self.fail(f"state machine safety: node {node.id} applies {entry} at {entry.offset}, others applied {c}")
        if entry.offset > self.max_committed:
            self.max_committed = entry.offset
        node.app.apply(entry)
        d = self.digest_at.setdefault(entry.offset + 1, node.app.digest)
        if d != node.app.digest:
            self.fail(f"node {node.id} state after {entry.offset} differs")

    def on_restore(self, node: SimNode, snap: Snapshot) -> None:
        node.app.restore(snap)
        d = self.digest_at.get(snap.end_offset)
        if d is None or d != node.app.digest:
            self.fail(f"node {node.id} restores a snapshot at {snap.end_offset} unlike the applied state")
        c = self.committed.get(snap.end_offset - 1)
        if c is not None and c.epoch != snap.epoch:
            self.fail(f"snapshot at {snap.end_offset} has epoch {snap.epoch}, committed entry has {c.epoch}")

    def every_step(self) -> None:
        for node in self.sim.nodes.values():
            raft = node.raft
            if raft is None:
                continue
            if raft.role is Role.LEADER and self.leaders.get(raft.epoch) != node.id:
                recorded = self.leaders.get(raft.epoch)
                self.fail(f"election safety: {node.id} leads epoch {raft.epoch}, recorded {recorded}")
            hw = raft.high_watermark
            self.mirror_matches(node)
            if hw < node.last_hw:
                self.fail(f"node {node.id} high watermark went back from {node.last_hw} to {hw}")
            if hw > raft.log.end:
                self.fail(f"node {node.id} high watermark {hw} beyond its log end {raft.log.end}")
            node.last_hw = hw

    def mirror_matches(self, node: SimNode) -> None:
        """The Readys so far describe exactly the node's log (cheap part checked every step)."""
        raft = node.raft
        if raft is None:
            return
        mirror, log = node.mirror, raft.log
        if mirror.base != log.start or mirror.end != log.end:
            self.fail(f"node {node.id} Readys describe log [{mirror.base}, {mirror.end}), "
                      f"node has [{log.start}, {log.end})")

    def disk_matches(self, node: SimNode) -> None:
        """Once its Readys are all written, a node's disk says what the node believes."""
        raft = node.raft
        if raft is None or node.pending:
            return
        disk, log = node.disk, raft.log
        if disk.hard_state != raft.hard_state:
            self.fail(f"node {node.id} disk hard state {disk.hard_state} != {raft.hard_state}")
        if disk.snapshot != raft.snapshot:
            self.fail(f"node {node.id} disk snapshot differs from the node's")
        if disk.base != log.start or disk.entries != log.slice(log.start, log.end):
            self.fail(f"node {node.id} disk log [{disk.base}, {disk.end}) != node log [{log.start}, {log.end})")


@dataclass
class Stats:
    elections: int = 0
    max_epoch: int = 0
    committed: int = 0
    crashes: int = 0
    torn_writes: int = 0
    truncations: int = 0
    snapshots_taken: int = 0
    snapshots_installed: int = 0
    resigns: int = 0
    step_downs: int = 0  # leaders that resigned on their own (check quorum, restart)
    pauses: int = 0
    messages: int = 0
    calm_periods: int = 0
    recovery_steps: list[int] = field(default_factory=list)


class Simulation:
    def __init__(
        self,
        seed: int,
        config: SimConfig | None = None,
        node_factory: NodeFactory | None = None,
    ) -> None:
        self.seed = seed
        self.cfg = cfg = config or SimConfig()
        self.rng = random.Random(seed)
        self.node_factory: NodeFactory = node_factory or RaftNode
        self.voters = frozenset(range(1, cfg.voters + 1))
        ids = [*sorted(self.voters), *range(100, 100 + cfg.observers)]
        self.nodes = {i: SimNode(i) for i in ids}
        self.now = 0
        self.step_no = 0
        self.net: list[tuple[int, int, Message]] = []
        self.seq = 0
        self.blocked: set[tuple[int, int]] = set()
        self.loss = self.rng.uniform(*cfg.loss)
        self.chaos = True
        self.phase_end = self.rng.randint(*cfg.chaos_steps)
        self.calm_start = 0
        self.probe: bytes | None = None
        self.probe_offset: int | None = None
        self.proposals = 0
        self.stats = Stats()
        self.checker = Checker(self)
        for node in self.nodes.values():
            self._start(node)

    # Nodes -------------------------------------------------------------------------------

    def _start(self, node: SimNode) -> None:
        node.lives += 1
        rng = random.Random(f"{self.seed}/{node.id}/{node.lives}")
        storage = node.disk.storage()
        skew = self.cfg.clock_skew
        node.clock_rate = self.rng.uniform(1 - skew, 1 + skew)
        node.clock_origin = self.now
        node.paused_until = 0
        node.raft = self.node_factory(node.id, self.voters, storage, self.cfg.raft, rng, self.now)
        node.app = App(storage.snapshot)
        node.snapshot_every = self.rng.randint(*self.cfg.snapshot_every)
        node.last_hw = node.raft.high_watermark
        node.pending.clear()
        node.mirror = node.disk.copy()
        self._collect(node)
        # Start-up may drop stored entries a snapshot covers; from here the mirror is the log.
        node.mirror.base = node.raft.log.start
        node.mirror.entries = node.raft.log.slice(node.raft.log.start, node.raft.log.end)

    def _crash(self, node: SimNode) -> None:
        self.stats.crashes += 1
        if node.pending and self.rng.random() < self.cfg.torn_write_prob:
            self.stats.torn_writes += 1
            self.checker.on_persist(node, node.disk.write(node.pending[0][0], torn=self.rng))
        node.pending.clear()
        node.held.clear()
        node.raft = None
        node.restart_at = self.step_no + self.rng.randint(*self.cfg.downtime_steps)

    def _collect(self, node: SimNode) -> None:
        """Drain the node's Ready right after an input and queue it for the disk."""
        raft = node.raft
        assert raft is not None
        if not raft.has_ready():
            return
        r = raft.ready()
        if r.soft_state is not None and r.soft_state.role is Role.LEADER:
            self.stats.elections += 1
            self.stats.max_epoch = max(self.stats.max_epoch, r.soft_state.epoch)
        if r.soft_state is not None and r.soft_state.role is Role.RESIGNED:
            self.stats.step_downs += 1
        if r.truncate_to is not None:
            self.stats.truncations += 1
        self.checker.on_ready(node, raft, r)
        node.mirror.write(r)
        node.pending.append((r, raft.epoch))

    def _input(self, node: SimNode, method: str, *args: object) -> None:
        """Call ``node.raft.<method>(*args)`` and collect what it produced."""
        raft = node.raft
        assert raft is not None
        try:
            getattr(raft, method)(*args)
        except SafetyError as exc:
            self.checker.fail(f"node {node.id} detected: {exc}")
        self._collect(node)

    def _flush_disk(self, node: SimNode) -> None:
        """Persist queued Readys in order, then send their messages and apply their commits."""
        while node.pending and node.raft is not None:
            r, epoch = node.pending.popleft()
            self.checker.on_persist(node, node.disk.write(r))
            for m in r.messages:
                self._send(m)
            if r.restore is not None:
                self.stats.snapshots_installed += 1
                self.checker.on_restore(node, r.restore)
            for entry in r.committed:
                self.checker.on_apply(node, entry, epoch)
                if entry.data == self.probe and self.probe_offset is None:
                    self.probe_offset = entry.offset
            self.stats.committed = max(self.stats.committed, self.checker.max_committed + 1)
            if node.app.applied_since_snapshot >= node.snapshot_every:
                data = node.app.snapshot_data(self.cfg.snapshot_pad)
                end = node.app.next_offset
                self._input(node, "take_snapshot", end, data)
                node.app.applied_since_snapshot = 0
                self.stats.snapshots_taken += 1

    # Network -----------------------------------------------------------------------------

    def _send(self, m: Message) -> None:
        self.stats.messages += 1
        if self.chaos:
            if (m.src, m.dst) in self.blocked or self.rng.random() < self.loss:
                return
            copies = 2 if self.rng.random() < self.cfg.dup_prob else 1
            lo, hi = self.cfg.delay_ms
        else:
            copies = 1
            lo, hi = self.cfg.calm_delay_ms
        for _ in range(copies):
            self.seq += 1
            heapq.heappush(self.net, (self.now + self.rng.randint(lo, hi), self.seq, m))

    def _deliver(self) -> None:
        net = self.net
        while net and net[0][0] <= self.now:
            _, _, m = heapq.heappop(net)
            if self.chaos and (m.src, m.dst) in self.blocked:
                continue  # a partition that began while the message was in flight
            node = self.nodes[m.dst]
            if node.paused_until:
                node.held.append(m)
            elif node.raft is not None:
                self._input(node, "step", m)

    def _repartition(self) -> None:
        ids = list(self.nodes)
        kind = self.rng.randrange(5)
        self.blocked = set()
        if kind == 0:
            return  # heal
        leader = self.leader()
        if kind == 1 and leader is not None:  # isolate the leader completely
            for other in ids:
                if other != leader.id:
                    self.blocked |= {(leader.id, other), (other, leader.id)}
        elif kind == 2:  # split into two groups
            self.rng.shuffle(ids)
            cut = self.rng.randint(1, len(ids) - 1)
            left, right = set(ids[:cut]), set(ids[cut:])
            self.blocked = {(a, b) for a in left for b in right} | {(b, a) for a in left for b in right}
        elif kind == 3 and leader is not None:  # the leader can send but not receive, or the reverse
            inbound = self.rng.random() < 0.5
            for other in ids:
                if other != leader.id:
                    self.blocked.add((other, leader.id) if inbound else (leader.id, other))
        else:  # random one-way link failures
            for a in ids:
                for b in ids:
                    if a != b and self.rng.random() < 0.2:
                        self.blocked.add((a, b))

    # Driving -----------------------------------------------------------------------------

    def leader(self) -> SimNode | None:
        """The leader of the highest epoch, as an omniscient client would find it."""
        best: SimNode | None = None
        best_epoch = -1
        for node in self.nodes.values():
            raft = node.raft
            if raft is not None and not node.paused_until and raft.role is Role.LEADER and raft.epoch > best_epoch:
                best, best_epoch = node, raft.epoch
        return best

    def _propose(self, data: list[bytes]) -> bool:
        leader = self.leader()
        if leader is None:
            return False
        try:
            self._input(leader, "propose", data)
        except NotLeaderError:
            return False
        return True

    def _phase(self) -> None:
        cfg = self.cfg
        if self.step_no < self.phase_end:
            return
        if self.chaos:
            # Heal: every node up, no partitions, no loss; liveness must follow.
            self.chaos = False
            self.blocked = set()
            self.calm_start = self.step_no
            self.phase_end = self.step_no + cfg.calm_steps
            self.probe = f"probe-{self.step_no}".encode()
            self.probe_offset = None
            self.stats.calm_periods += 1
            for node in self.nodes.values():
                if node.raft is None:
                    self._start(node)
                elif node.paused_until:
                    self._resume(node)
        else:
            self.chaos = True
            self.phase_end = self.step_no + self.rng.randint(*cfg.chaos_steps)

    def _check_liveness(self) -> None:
        if self.chaos or self.probe is None:
            return
        waited = self.step_no - self.calm_start
        if self.probe_offset is not None and all(
            n.app.next_offset > self.probe_offset for n in self.nodes.values()
        ):
            self.stats.recovery_steps.append(waited)
            self.probe = None
            return
        if waited >= self.cfg.liveness_steps:
            states = {n.id: (n.raft.role.value, n.raft.epoch, n.raft.leader_id, n.raft.log.end,
                             n.raft.high_watermark, n.app.next_offset) if n.raft else None
                      for n in self.nodes.values()}
            self.checker.fail(f"liveness: probe not applied everywhere {waited} steps after healing: {states}")
        # Keep offering the probe to whoever leads until it commits (a leader may lose it).
        if self.probe_offset is None and waited % 20 == 0:
            self._propose([self.probe])

    def _resume(self, node: SimNode) -> None:
        node.paused_until = 0
        for m in node.held:
            self.seq += 1
            heapq.heappush(self.net, (self.now, self.seq, m))
        node.held.clear()

    def local_time(self, node: SimNode) -> int:
        return node.clock_origin + int((self.now - node.clock_origin) * node.clock_rate)

    def step(self) -> None:
        cfg = self.cfg
        rng = self.rng
        self.step_no += 1
        self.now += cfg.step_ms
        self._phase()
        if self.chaos:
            for node in self.nodes.values():
                if node.raft is None:
                    if self.step_no >= node.restart_at:
                        self._start(node)
                elif node.paused_until:
                    if self.step_no >= node.paused_until:
                        self._resume(node)
                elif rng.random() < cfg.crash_prob:
                    self._crash(node)
                elif rng.random() < cfg.pause_prob:
                    self.stats.pauses += 1
                    node.paused_until = self.step_no + rng.randint(*cfg.pause_steps)
            if rng.random() < cfg.partition_prob:
                self._repartition()
            if rng.random() < cfg.resign_prob:
                leader = self.leader()
                if leader is not None:
                    self.stats.resigns += 1
                    self._input(leader, "resign")
        self._deliver()
        for node in self.nodes.values():
            if node.raft is not None and not node.paused_until:
                self._input(node, "tick", self.local_time(node))
        if rng.random() < cfg.propose_prob:
            self.proposals += 1
            self._propose([f"v{self.proposals}.{i}".encode() for i in range(rng.randint(1, 3))])
        for node in self.nodes.values():
            if node.paused_until:
                continue
            if node.pending and (not self.chaos or rng.random() >= cfg.slow_disk_prob):
                self._flush_disk(node)
        self.checker.every_step()
        if self.step_no % 50 == 0:
            for node in self.nodes.values():
                self.checker.disk_matches(node)
        self._check_liveness()

    def run(self, steps: int | None = None) -> Stats:
        for _ in range(self.cfg.steps if steps is None else steps):
            self.step()
        return self.stats


# A hand-driven cluster for targeted tests ------------------------------------------------------

UNIT_RAFT_CONFIG = RaftConfig(
    election_timeout_ms=150,
    fetch_timeout_ms=300,
    fetch_max_wait_ms=50,
    request_timeout_ms=100,
    check_quorum_timeout_ms=450,
    resign_backoff_ms=20,
)


class Cluster:
    """Nodes wired by a lossless FIFO network that the test drives: ``run(ms)`` advances time in
    10 ms ticks and delivers every message in between. Links can be cut, nodes crashed and
    restarted (from what they persisted). Every Ready is persisted before its messages go out."""

    def __init__(
        self,
        voters: tuple[int, ...] = (1, 2, 3),
        observers: tuple[int, ...] = (),
        config: RaftConfig = UNIT_RAFT_CONFIG,
        seed: int = 0,
    ) -> None:
        self.voters = frozenset(voters)
        self.config = config
        self.seed = seed
        self.now = 0
        self.disks = {i: Disk() for i in (*voters, *observers)}
        self.nodes: dict[int, RaftNode] = {}
        self.applied: dict[int, list[bytes]] = {i: [] for i in self.disks}
        self.readys: dict[int, list[Ready]] = {i: [] for i in self.disks}
        self.inbox: deque[Message] = deque()
        self.blocked: set[tuple[int, int]] = set()
        self.sent: list[Message] = []
        self.clock_rate: dict[int, float] = {}  # a node's clock runs this much faster (default 1)
        for i in self.disks:
            self.start(i)

    # Nodes -------------------------------------------------------------------------------

    def start(self, node_id: int, rng_seed: int | None = None) -> RaftNode:
        rng = random.Random(f"{self.seed}/{node_id}/{rng_seed}")
        storage = self.disks[node_id].storage()
        node = RaftNode(node_id, self.voters, storage, self.config, rng, self.now)
        self.nodes[node_id] = node
        snap = storage.snapshot
        self.applied[node_id] = [d.encode() for d in json.loads(snap.data)] if snap is not None else []
        self.collect(node_id)
        return node

    def crash(self, node_id: int) -> None:
        del self.nodes[node_id]

    def collect(self, node_id: int) -> Ready | None:
        node = self.nodes.get(node_id)
        if node is None or not node.has_ready():
            return None
        r = node.ready()
        self.readys[node_id].append(r)
        self.disks[node_id].write(r)
        for m in r.messages:
            self.sent.append(m)
            self.inbox.append(m)
        if r.restore is not None:
            self.applied[node_id] = [d.encode() for d in json.loads(r.restore.data)]
        self.applied[node_id].extend(e.data for e in r.committed if not e.control)
        return r

    def snapshot(self, node_id: int) -> Snapshot | None:
        """Take a snapshot of everything ``node_id`` applied (the app state is its list)."""
        node = self.nodes[node_id]
        data = json.dumps([d.decode() for d in self.applied[node_id]]).encode()
        snap = node.take_snapshot(node.applied_offset, data)
        self.collect(node_id)
        return snap

    # Network and time --------------------------------------------------------------------

    def isolate(self, node_id: int) -> None:
        for other in self.disks:
            if other != node_id:
                self.blocked |= {(node_id, other), (other, node_id)}

    def heal(self) -> None:
        self.blocked = set()

    def deliver(self, limit: int = 100_000) -> None:
        for _ in range(limit):
            if not self.inbox:
                return
            m = self.inbox.popleft()
            node = self.nodes.get(m.dst)
            if node is None or (m.src, m.dst) in self.blocked:
                continue
            node.step(m)
            self.collect(m.dst)
        raise AssertionError("messages keep flowing without time passing")

    def deliver_until(self, stop: Callable[[Message], bool]) -> Message:
        """Deliver messages one by one until ``stop`` is true of one just delivered."""
        while self.inbox:
            m = self.inbox.popleft()
            node = self.nodes.get(m.dst)
            if node is None or (m.src, m.dst) in self.blocked:
                continue
            node.step(m)
            self.collect(m.dst)
            if stop(m):
                return m
        raise AssertionError("no such message")

    def run(self, ms: int, tick_ms: int = 10) -> None:
        self.deliver()
        for _ in range(ms // tick_ms):
            self.now += tick_ms
            for node_id, node in list(self.nodes.items()):
                node.tick(max(node.now_ms, int(self.now * self.clock_rate.get(node_id, 1.0))))
                self.collect(node_id)
            self.deliver()

    def propose(self, *data: bytes) -> int:
        leader = self.leader()
        assert leader is not None, "no leader"
        offset = self.nodes[leader].propose(list(data))
        self.collect(leader)
        self.deliver()
        return offset

    def leader(self) -> int | None:
        leaders = [i for i, n in self.nodes.items() if n.role is Role.LEADER]
        if not leaders:
            return None
        return max(leaders, key=lambda i: self.nodes[i].epoch)

    def wait_for_leader(self, ms: int = 3000) -> int:
        for _ in range(ms // 10):
            leader = self.leader()
            if leader is not None and all(
                n.leader_id == leader and n.epoch == self.nodes[leader].epoch
                for i, n in self.nodes.items() if i in self.voters and (i, leader) not in self.blocked
            ):
                return leader
            self.run(10)
        raise AssertionError("no leader elected")
