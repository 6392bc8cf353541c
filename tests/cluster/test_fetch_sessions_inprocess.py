"""Followers fetch in incremental fetch sessions (KIP-227): three in-process brokers replicating
a 48-partition topic, each follower keeping one privileged session per leader that holds
exactly the partitions it follows from that leader, and naming no partition at all once idle."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from riverlog.client.connection import BrokerConnection
from riverlog.cluster.fetcher import LeaderFetcher
from riverlog.controller.topic_ops import NewTopic
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode
from riverlog.protocol.record_batch import NewRecord, build_batch
from support.inprocess_cluster import InProcessCluster, run_scenario

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

TOPIC = "events"
PARTITIONS = 48


def run(tmp_path: Path, scenario: Callable[[InProcessCluster], Awaitable[None]]) -> None:
    # Creating 144 logs holds the shared event loop for a while on a slow machine: no broker
    # must be fenced for missing heartbeats meanwhile (leaders would move).
    run_scenario(tmp_path, scenario, 3, {"broker.session.timeout.ms": 20_000})


async def create_topic(cluster: InProcessCluster, name: str, partitions: int) -> uuid.UUID:
    # Every broker leads a third of the partitions and follows the rest from both others.
    assignments = {i: [1 + (i + k) % 3 for k in range(3)] for i in range(partitions)}
    (outcome,) = await cluster.controller.create_topics([NewTopic(name, assignments=assignments)],
                                                        validate_only=False, default_partitions=1,
                                                        default_replication=3)
    assert outcome.error == ErrorCode.NONE, outcome.message
    assert outcome.topic_id is not None
    await cluster.wait_until(lambda: all(b.replicas.get(name, i) is not None for b in cluster.brokers.values()
                                         for i in range(partitions)), what=f"replicas of {name}")
    return outcome.topic_id


async def produce(cluster: InProcessCluster, name: str, topic_id: uuid.UUID, partitions: int, rounds: int) -> None:
    """``rounds`` acks=all batches of 2 records to every partition, each sent to its leader."""
    conns = {n: await BrokerConnection.connect("127.0.0.1", port) for n, port in cluster.ports.items()}
    try:
        for r in range(rounds):
            for i in range(partitions):
                batch = build_batch([NewRecord(value=b"%d-%d-%d" % (r, i, k)) for k in range(2)])
                body = {"transactional_id": None, "acks": -1, "timeout_ms": 20_000, "topic_data": [
                    {"name": name, "topic_id": topic_id, "partition_data": [{"index": i, "records": batch}]}]}
                leader = cluster.partition(name, i).leader
                response = await conns[leader].request(ApiKey.PRODUCE, body)
                assert response["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.NONE
    finally:
        for conn in conns.values():
            await conn.close()


def replicated(cluster: InProcessCluster, name: str, partitions: int) -> bool:
    """Every replica has the leader's whole log, and knows it is committed."""
    for i in range(partitions):
        ends = {(p.log.log_end_offset, p.high_watermark) for b in cluster.brokers.values()
                if (p := b.replicas.get(name, i)) is not None}
        if len(ends) != 1:
            return False
        end, hw = ends.pop()
        if end != hw or end == 0:
            return False
    return True


def fetchers(cluster: InProcessCluster) -> list[tuple[int, LeaderFetcher]]:
    return [(n, f) for n, b in cluster.brokers.items() for f in b.replicas.fetchers.fetchers.values()]


def session_problem(cluster: InProcessCluster) -> str | None:
    """Why the leaders' sessions do not (yet) hold exactly what the followers fetch, if so."""
    found = fetchers(cluster)
    if len(found) != 6:  # every broker fetches from both others
        return f"{len(found)} fetchers"
    for node, fetcher in found:
        where = f"broker {node} fetching from {fetcher.leader_id}"
        if not fetcher.session.incremental:
            return f"{where}: no session"
        session = cluster.brokers[fetcher.leader_id].fetch_sessions.get(fetcher.session.session_id)
        if session is None or not session.privileged or not session.uses_topic_ids:
            return f"{where}: session {fetcher.session.session_id} is {session}"
        followed = {(s.partition.topic_id, s.partition.index) for s in fetcher.partitions.values()}
        if set(session.partitions) != followed:
            return f"{where}: session holds {sorted(session.partitions)}, follower fetches {sorted(followed)}"
        # What the leader's session reads from is where the follower's logs end.
        for s in fetcher.partitions.values():
            cached = session.partitions[(s.partition.topic_id, s.partition.index)]
            if cached.position.fetch_offset != s.partition.log.log_end_offset:
                return f"{where}: {s.partition.topic}-{s.partition.index} at {cached.position}"
    return None


async def sessions_hold_followed_partitions(cluster: InProcessCluster) -> None:
    try:
        await cluster.wait_until(lambda: session_problem(cluster) is None, timeout=5, what="sessions")
    except AssertionError:
        raise AssertionError(session_problem(cluster)) from None


def test_followers_replicate_in_incremental_fetch_sessions(tmp_path: Path) -> None:
    async def scenario(cluster: InProcessCluster) -> None:
        topic_id = await create_topic(cluster, TOPIC, PARTITIONS)
        await produce(cluster, TOPIC, topic_id, PARTITIONS, rounds=4)  # 384 records
        await cluster.wait_until(lambda: replicated(cluster, TOPIC, PARTITIONS), what="replication")
        for _, fetcher in fetchers(cluster):
            assert len(fetcher.partitions) == 16
            assert fetcher.session.incremental_requests > 5 * fetcher.session.full_requests, vars(fetcher.session)
        await sessions_hold_followed_partitions(cluster)

        # Idle: requests go on (each waits replica.fetch.wait.max.ms at the leader), all
        # incremental and naming no partition.
        before = {id(f): (f.session.full_requests, f.session.incremental_requests, f.session.partitions_sent)
                  for _, f in fetchers(cluster)}
        await asyncio.sleep(1.0)
        for node, fetcher in fetchers(cluster):
            full, incremental, sent = before[id(fetcher)]
            assert fetcher.session.full_requests == full, f"broker {node} fetched in full again"
            assert fetcher.session.incremental_requests >= incremental + 2
            assert fetcher.session.partitions_sent == sent, f"broker {node} named partitions while idle"

        # New partitions to follow join the sessions incrementally, and replicate.
        other = "more-events"
        other_id = await create_topic(cluster, other, 6)
        await produce(cluster, other, other_id, 6, rounds=2)
        await produce(cluster, TOPIC, topic_id, PARTITIONS, rounds=1)
        await cluster.wait_until(lambda: replicated(cluster, other, 6) and replicated(cluster, TOPIC, PARTITIONS),
                                 what="replication of both topics")
        for node, fetcher in fetchers(cluster):
            assert fetcher.session.full_requests == before[id(fetcher)][0], f"broker {node} fetched in full again"
        await sessions_hold_followed_partitions(cluster)

        # Deleted partitions are forgotten.
        (outcome,) = await cluster.controller.delete_topics([(other, None)])
        assert outcome.error == ErrorCode.NONE
        await cluster.wait_until(lambda: all(len(f.partitions) == 16 for _, f in fetchers(cluster)),
                                 what="the deleted topic unfollowed")
        await sessions_hold_followed_partitions(cluster)

    run(tmp_path, scenario)


def test_followers_start_over_when_the_leader_loses_their_sessions(tmp_path: Path) -> None:
    async def scenario(cluster: InProcessCluster) -> None:
        topic_id = await create_topic(cluster, TOPIC, PARTITIONS)
        await produce(cluster, TOPIC, topic_id, PARTITIONS, rounds=1)
        await cluster.wait_until(lambda: replicated(cluster, TOPIC, PARTITIONS), what="replication")
        await sessions_hold_followed_partitions(cluster)
        # The leader forgets every session (as an eviction or a restart would): the followers'
        # next incremental requests get FETCH_SESSION_ID_NOT_FOUND and they start new sessions.
        old = {id(f): f.session.session_id for _, f in fetchers(cluster)}
        for b in cluster.brokers.values():
            for _, f in fetchers(cluster):
                b.fetch_sessions.remove(f.session.session_id)
        await produce(cluster, TOPIC, topic_id, PARTITIONS, rounds=1)
        await cluster.wait_until(lambda: replicated(cluster, TOPIC, PARTITIONS), what="replication")
        await cluster.wait_until(lambda: all(f.session.incremental and f.session.session_id != old[id(f)]
                                             for _, f in fetchers(cluster)), what="new sessions")
        await sessions_hold_followed_partitions(cluster)

    run(tmp_path, scenario)
