"""RaftDriver: three drivers with real files in one event loop, over an in-memory transport."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from riverlog.controller.quorum.driver import LeadershipLostError, RaftDriver, Transport
from riverlog.controller.quorum.storage import QuorumStorage
from riverlog.controller.raft import Entry, Message, NotLeaderError, RaftConfig, Snapshot

pytestmark = [pytest.mark.unit, pytest.mark.timeout(120)]

VOTERS = (1, 2, 3)
# Short timeouts so failover takes well under a second; the waits below are bounds, not asserts.
CONFIG = RaftConfig(
    election_timeout_ms=150,
    fetch_timeout_ms=300,
    fetch_max_wait_ms=50,
    request_timeout_ms=100,
    check_quorum_timeout_ms=450,
)
# Failover runs with pre-vote on (the default): the core once livelocked here, survivors
# refusing each other's pre-votes (see test_raft_node's regression test).
FAILOVER_CONFIG = CONFIG
WAIT_S = 20.0


class Network:
    """Routes messages between the drivers registered in it, asynchronously (next loop turn),
    like a real socket would; messages to a node that is down are lost."""

    def __init__(self) -> None:
        self.drivers: dict[int, RaftDriver] = {}

    def transport(self) -> Transport:
        network = self

        class _Local(Transport):
            def send(self, msg: Message) -> None:
                asyncio.get_running_loop().call_soon(network._deliver, msg)

        return _Local()

    def _deliver(self, msg: Message) -> None:
        driver = self.drivers.get(msg.dst)
        if driver is not None:
            driver.deliver(msg)


class Cluster:
    def __init__(self, root: Path, config: RaftConfig = CONFIG) -> None:
        self.root = root
        self.config = config
        self.network = Network()
        self.applied: dict[int, list[bytes]] = {}

    async def start(self, node_id: int) -> RaftDriver:
        applied: list[bytes] = []
        self.applied[node_id] = applied

        def apply(entries: list[Entry], restore: Snapshot | None) -> None:
            if restore is not None:
                applied[:] = [v for v in restore.data.split(b",") if v]
            applied.extend(e.data for e in entries)

        driver = RaftDriver(
            node_id,
            VOTERS,
            QuorumStorage(self.root / f"node-{node_id}"),
            self.network.transport(),
            apply,
            self.config,
            rng=random.Random(node_id),
        )
        await driver.start()
        self.network.drivers[node_id] = driver
        return driver

    async def stop(self, node_id: int) -> None:
        driver = self.network.drivers.pop(node_id)
        await driver.stop()

    def leader(self) -> RaftDriver | None:
        leaders = [d for d in self.network.drivers.values() if d.is_leader]
        return leaders[0] if len(leaders) == 1 else None

    async def stable_leader(self) -> RaftDriver:
        """A leader that every running node follows."""

        def agreed() -> bool:
            leader = self.leader()
            return leader is not None and all(d.leader_id == leader.node_id for d in self.network.drivers.values())

        await eventually(agreed)
        leader = self.leader()
        assert leader is not None
        return leader

    async def propose(self, data: bytes) -> int:
        """Propose on whoever leads, retrying while leadership moves (values are unique, so a
        retry of a proposal whose outcome was unknown shows up at most as a duplicate)."""
        async with asyncio.timeout(WAIT_S):
            while True:
                leader = self.leader()
                if leader is not None:
                    try:
                        return await leader.propose(data)
                    except (NotLeaderError, LeadershipLostError):
                        pass
                await asyncio.sleep(0.02)

    async def stop_all(self) -> None:
        for node_id in list(self.network.drivers):
            await self.stop(node_id)


async def eventually(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(WAIT_S):
        while not predicate():
            await asyncio.sleep(0.02)


def dedup(values: list[bytes]) -> list[bytes]:
    seen: dict[bytes, None] = {}
    for v in values:
        seen.setdefault(v, None)
    return list(seen)


def test_elect_commit_fail_over_and_catch_up(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path, FAILOVER_CONFIG)
        try:
            for node_id in VOTERS:
                await cluster.start(node_id)
            leader = await cluster.stable_leader()

            # Proposals commit, and every node applies them in proposal order.
            first = [f"a{i}".encode() for i in range(5)]
            offsets = [await leader.propose(v) for v in first]
            assert offsets == sorted(offsets)
            await eventually(lambda: all(cluster.applied[n] == first for n in VOTERS))
            # Concurrent proposals commit too (order among them is the leader's append order).
            batch = [f"b{i}".encode() for i in range(5)]
            await asyncio.gather(*(leader.propose(v) for v in batch))
            await eventually(lambda: all(cluster.applied[n] == first + batch for n in VOTERS))

            # A follower refuses proposals at once.
            follower = next(d for d in cluster.network.drivers.values() if not d.is_leader)
            with pytest.raises(NotLeaderError):
                await follower.propose(b"nope")

            # The leader goes away: another is elected and later proposals commit.
            old = leader.node_id
            await cluster.stop(old)
            new_leader = await cluster.stable_leader()
            assert new_leader.node_id != old
            later = [f"c{i}".encode() for i in range(5)]
            for v in later:
                await cluster.propose(v)
            expected = first + batch + later
            live = [n for n in VOTERS if n != old]
            await eventually(lambda: all(dedup(cluster.applied[n]) == expected for n in live))
            assert cluster.applied[live[0]] == cluster.applied[live[1]]

            # The stopped node restarts from its directory and catches up from the leader.
            await cluster.start(old)
            await eventually(lambda: cluster.applied[old] == cluster.applied[live[0]])
            more = b"d0"
            await cluster.propose(more)
            await eventually(lambda: all(cluster.applied[n][-1:] == [more] for n in VOTERS))
            assert dedup(cluster.applied[old]) == [*expected, more]
        finally:
            await cluster.stop_all()

    asyncio.run(scenario())


def test_snapshot_and_restart_from_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        try:
            for node_id in VOTERS:
                await cluster.start(node_id)
            leader = await cluster.stable_leader()
            values = [f"v{i}".encode() for i in range(4)]
            for v in values:
                await leader.propose(v)
            await eventually(lambda: all(cluster.applied[n] == values for n in VOTERS))
            # Every node snapshots what it applied; the state is the comma-joined values.
            for driver in cluster.network.drivers.values():
                node = driver.node
                driver.take_snapshot(node.applied_offset, b",".join(cluster.applied[driver.node_id]))
            follower = next(n for n in VOTERS if n != leader.node_id)
            directory = tmp_path / f"node-{follower}"
            await eventually(lambda: any(p.suffix == ".checkpoint" for p in directory.iterdir()))
            await cluster.stop(follower)
            await cluster.propose(b"after")
            # Restarted, it resets to its snapshot and applies only what came after it.
            await cluster.start(follower)
            await eventually(lambda: cluster.applied[follower] == [*values, b"after"])
        finally:
            await cluster.stop_all()

    asyncio.run(scenario())
