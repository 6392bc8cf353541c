"""The replica fetcher manager's task lifecycle: a fetcher that loses its last partition is told to
end, and stopping the manager waits for it too, so no fetcher task outlives the broker's loop (one
that did was later garbage-collected mid-await, "coroutine ignored GeneratorExit", in CI)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, cast

import pytest
from riverlog.cluster.fetcher import FetcherConfig, ReplicaFetcherManager
from riverlog.cluster.partition import Partition

pytestmark = pytest.mark.unit


@dataclass
class FollowedPartition:
    """The fields the manager reads to route a partition to its leader's fetcher."""

    topic: str
    index: int
    leader: int
    leader_epoch: int


def manager() -> ReplicaFetcherManager:
    # No leader has an endpoint: each fetcher retries its connection every backoff, forever.
    return ReplicaFetcherManager(1, FetcherConfig(backoff_ms=50), lambda _: None, lambda: 0)


def follow(m: ReplicaFetcherManager, topic: str, leader: int) -> Any:
    p = FollowedPartition(topic, 0, leader, 1)
    m.follow(cast(Partition, p))
    return p


def test_stop_waits_for_a_fetcher_that_was_just_told_to_end() -> None:
    async def scenario() -> None:
        m = manager()
        m.start()
        left = follow(m, "a", leader=2)
        follow(m, "b", leader=3)
        await asyncio.sleep(0.1)  # both fetchers running, retrying their connections
        retired = m.fetchers[2]
        m.unfollow(left)  # broker 2's fetcher has nothing left: it is told to end
        assert 2 not in m.fetchers and retired.running
        await m.stop()  # without yielding in between
        assert not retired.running
        assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("replica-fetcher-")]

    asyncio.run(scenario())


def test_a_retired_fetcher_that_ended_is_forgotten() -> None:
    async def scenario() -> None:
        m = manager()
        m.start()
        left = follow(m, "a", leader=2)
        await asyncio.sleep(0.1)
        retired = m.fetchers[2]
        m.unfollow(left)
        await retired.wait_closed()
        await asyncio.sleep(0)  # the done callback runs on the next loop turn
        assert retired not in m._retired
        await m.stop()

    asyncio.run(scenario())


def test_following_again_after_stop_starts_nothing() -> None:
    async def scenario() -> None:
        m = manager()
        m.start()
        await m.stop()
        follow(m, "a", leader=2)
        assert m.fetchers == {}

    asyncio.run(scenario())
