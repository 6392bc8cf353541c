"""Replication and failover between three brokers in one process (shared controller, real TCP).

The shared controller stands in for the metadata quorum; the brokers replicate to each other
with Fetch over loopback exactly as separate processes would. Faults: a broker "crash" drops its
sockets, fetchers and open logs without a clean shutdown (as kill -9), and the test fences it at
the controller (as a missed heartbeat would). Checks are on the replicas' logs themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from riverlog.client.connection import BrokerConnection
from riverlog.controller.topic_ops import NewTopic
from riverlog.coordinator.placement import GROUP_METADATA_TOPIC
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode
from riverlog.protocol.record_batch import NewRecord, build_batch, iter_records
from support.inprocess_cluster import InProcessCluster, run_scenario

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

TOPIC = "orders"


def run(tmp_path: Path, scenario: Callable[[InProcessCluster], Awaitable[None]], **overrides: object) -> None:
    run_scenario(tmp_path, scenario, 3, overrides)


async def create_topic(cluster: InProcessCluster, name: str = TOPIC, *, min_isr: int = 2) -> uuid.UUID:
    # Partition 0 on brokers 1, 2, 3: broker 1 is the preferred leader.
    (outcome,) = await cluster.controller.create_topics(
        [NewTopic(name, assignments={0: [1, 2, 3]}, configs={"min.insync.replicas": str(min_isr)})],
        validate_only=False, default_partitions=1, default_replication=3)
    assert outcome.error == ErrorCode.NONE, outcome.message
    assert outcome.topic_id is not None
    await cluster.wait_until(lambda: all(b.replicas.get(name, 0) is not None for b in cluster.brokers.values()),
                             what="replicas on every broker")
    return outcome.topic_id


def values_in_log(cluster: InProcessCluster, node_id: int, topic: str = TOPIC) -> list[tuple[int, int]]:
    """(offset, value) of every record of a replica's log (values are decimal numbers)."""
    data = cluster.log_bytes(node_id, topic)
    return [(record.offset, int(record.value or b"-1")) for _, record in iter_records(data)]


def under_replicated(cluster: InProcessCluster, node_id: int) -> float:
    """The broker's riverlog_under_replicated_partitions gauge, as Prometheus would scrape it."""
    for line in cluster.brokers[node_id].metrics.render().decode().splitlines():
        if line.startswith("riverlog_under_replicated_partitions "):
            return float(line.split()[1])
    raise AssertionError("no riverlog_under_replicated_partitions metric")


def replica(cluster: InProcessCluster, node_id: int, topic: str = TOPIC) -> Any:
    p = cluster.brokers[node_id].replicas.get(topic, 0)
    assert p is not None
    return p


async def caught_up(cluster: InProcessCluster, nodes: list[int], topic: str = TOPIC) -> None:
    """Every listed replica has the leader's log and the high watermark is at its end."""
    def done() -> bool:
        leader = cluster.partition(topic).leader
        if leader not in cluster.brokers:
            return False
        lp = replica(cluster, leader, topic)
        return lp.high_watermark == lp.log.log_end_offset and all(
            replica(cluster, n, topic).log.log_end_offset == lp.log.log_end_offset for n in nodes)
    await cluster.wait_until(done, what=f"replicas {nodes} to catch up")


class NumberedProducer:
    """An idempotent acks=all confluent-kafka producer writing 0, 1, 2, ... to partition 0 from
    its own thread until stopped; it remembers the offset of every acknowledged number."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 2,
            "message.timeout.ms": 120_000, "retry.backoff.ms": 50, "retry.backoff.max.ms": 200,
            "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200,
            "topic.metadata.refresh.interval.ms": 1000, "log_level": 3,
        })
        self.acked: dict[int, int] = {}
        self.errors: list[str] = []
        self.sent = 0
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def _delivered(self, err: Any, msg: Any) -> None:
        with self.lock:
            if err is None:
                self.acked[int(msg.value())] = msg.offset()
            else:
                self.errors.append(str(err))

    def run(self) -> None:
        while not self.stop.is_set():
            if self.sent - len(self.acked) < 5000:
                self.producer.produce(TOPIC, str(self.sent).encode(), partition=0, on_delivery=self._delivered)
                self.sent += 1
                self.producer.poll(0)
            else:
                self.producer.poll(0.01)
        remaining = self.producer.flush(60)
        assert remaining == 0, f"{remaining} records still unacknowledged"

    def count(self) -> int:
        with self.lock:
            return len(self.acked)


async def wait_acked(producer: NumberedProducer, at_least: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while producer.count() < at_least:
        assert time.monotonic() < deadline, f"only {producer.count()} of {at_least} records acknowledged"
        assert not producer.errors, producer.errors[:5]
        await asyncio.sleep(0.02)


def test_leader_crash_failover_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    async def scenario(cluster: InProcessCluster) -> None:
        topic_id = await create_topic(cluster)
        assert cluster.partition(TOPIC).leader == 1
        producer = NumberedProducer(cluster.bootstrap)
        producing = asyncio.ensure_future(asyncio.to_thread(producer.run))
        try:
            await failover(cluster, topic_id, producer, producing)
        finally:
            producer.stop.set()
            with contextlib.suppress(Exception):
                await producing

    async def failover(cluster: InProcessCluster, topic_id: uuid.UUID, producer: NumberedProducer,
                       producing: Awaitable[None]) -> None:
        await wait_acked(producer, 1500)

        # Give the leader a tail its followers never get: they stop fetching (a fetch in flight
        # still completes), then records go to broker 1 with acks=1 (the numbered producer is
        # stuck meanwhile: its acks=all requests wait for the followers). acks=1 records may be
        # lost in a failover; these must be, as no other replica has them.
        for n in (2, 3):
            cluster.brokers[n].replicas.fetchers.pause()
        await cluster.wait_until(lambda: not any(cluster.brokers[n].replicas.fetchers.busy for n in (2, 3)),
                                 what="the followers' last fetches")
        async with Client(cluster, 1) as client:
            for _ in range(3):
                assert await client.produce(topic_id, [b"-1"] * 10, acks=1) == ErrorCode.NONE
        old = replica(cluster, 1)
        tail_end = old.log.log_end_offset
        assert tail_end > max(replica(cluster, n).log.log_end_offset for n in (2, 3))
        epoch_before = cluster.partition(TOPIC).leader_epoch
        acked_before_crash = producer.count()

        await cluster.crash(1)
        await cluster.fence(1)
        part = cluster.partition(TOPIC)
        assert part.leader in (2, 3), part
        assert part.leader_epoch == epoch_before + 1
        assert 1 not in part.isr and set(part.isr) == {2, 3}
        # The new leader stopped fetching; the other follower fetches from it now.
        other = ({2, 3} - {part.leader}).pop()
        assert cluster.brokers[part.leader].replicas.fetchers.following(TOPIC, 0) is None
        assert cluster.brokers[other].replicas.fetchers.following(TOPIC, 0) == part.leader
        for n in (2, 3):
            cluster.brokers[n].replicas.fetchers.resume()

        # Production resumes on the new leader, which starts its epoch below the old one's tail.
        new_leader = replica(cluster, part.leader)
        assert new_leader.leader_epoch_start_offset < tail_end
        await wait_acked(producer, acked_before_crash + 1500)

        # The old leader comes back from its own log directory: it truncates the tail it alone
        # had, catches up and rejoins the ISR.
        await cluster.start_broker(1)
        await cluster.wait_until(lambda: set(cluster.partition(TOPIC).isr) == {1, 2, 3}, what="broker 1 in the ISR")
        await wait_acked(producer, producer.count() + 500)
        producer.stop.set()
        await producing
        assert not producer.errors, producer.errors[:5]
        await caught_up(cluster, [1, 2, 3])

        logs = {n: cluster.log_bytes(n, TOPIC) for n in (1, 2, 3)}
        assert logs[1] == logs[2] == logs[3], "the in-sync replicas' logs differ"
        records = values_in_log(cluster, 2)
        values = [v for _, v in records]
        assert min(values) >= 0, "broker 1's unreplicated tail survived"
        assert len(values) == len(set(values)), "a record is in the log twice"
        assert values == sorted(values), "records are out of produce order"
        offsets = dict((v, o) for o, v in records)
        missing = [v for v in producer.acked if v not in offsets]
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
        assert all(offsets[v] == o for v, o in producer.acked.items()), "an acknowledged offset moved"
        # Broker 1's old tail (epoch 0 past the new leader's epoch start) was replaced.
        epochs = {h.base_offset: h.partition_leader_epoch for h, _ in iter_records(logs[1])}
        start = new_leader.leader_epoch_start_offset
        assert all(e >= epoch_before + 1 for o, e in epochs.items() if o >= start)

    run(tmp_path, scenario, **{"replica.lag.time.max.ms": 5000})


def test_isr_shrinks_when_a_follower_stalls_and_expands_when_it_catches_up(tmp_path: Path) -> None:
    async def scenario(cluster: InProcessCluster) -> None:
        topic_id = await create_topic(cluster)
        async with Client(cluster, 1) as client:
            for i in range(20):
                assert await client.produce(topic_id, [b"a%d" % i], acks=-1) == ErrorCode.NONE
            assert cluster.partition(TOPIC).isr == (1, 2, 3)
            cluster.brokers[3].replicas.fetchers.pause()
            # acks=all waits for broker 3 until the leader drops it from the ISR: the answer
            # comes only once the ISR no longer holds the stalled follower.
            assert await client.produce(topic_id, [b"during stall"], acks=-1) == ErrorCode.NONE
            assert cluster.partition(TOPIC).isr == (1, 2)
            await cluster.wait_until(lambda: under_replicated(cluster, 1) == 1, what="under-replicated metric")
            for i in range(20):
                assert await client.produce(topic_id, [b"b%d" % i], acks=-1) == ErrorCode.NONE
            behind = replica(cluster, 3).log.log_end_offset
            assert behind < replica(cluster, 1).log.log_end_offset

            cluster.brokers[3].replicas.fetchers.resume()
            await cluster.wait_until(lambda: cluster.partition(TOPIC).isr == (1, 2, 3), what="ISR expansion")
            await caught_up(cluster, [1, 2, 3])
            assert cluster.log_bytes(1, TOPIC) == cluster.log_bytes(3, TOPIC)
            await cluster.wait_until(lambda: under_replicated(cluster, 1) == 0, what="under-replicated back to 0")

    run(tmp_path, scenario, **{"replica.lag.time.max.ms": 1000})


def test_min_insync_replicas_and_high_watermark(tmp_path: Path) -> None:
    async def scenario(cluster: InProcessCluster) -> None:
        topic_id = await create_topic(cluster)
        async with Client(cluster, 1) as client:
            assert await client.produce(topic_id, [b"first"], acks=-1) == ErrorCode.NONE
            for n in (2, 3):
                cluster.brokers[n].replicas.fetchers.pause()
            # acks=1 appends but the high watermark stays: consumers must not see the record.
            assert await client.produce(topic_id, [b"uncommitted"], acks=1) == ErrorCode.NONE
            leader = replica(cluster, 1)
            assert leader.log.log_end_offset == 2 and leader.high_watermark == 1
            hw, seen = await client.fetch(topic_id, 0)
            assert hw == 1 and seen == [b"first"]
            # acks=all waits; the ISR shrinks to the leader alone, below min.insync.replicas=2:
            # the record is then committed, but the producer is told it lacks replicas.
            code = await client.produce(topic_id, [b"waiting"], acks=-1)
            assert code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            assert cluster.partition(TOPIC).isr == (1,)
            # Now refused before the append.
            assert await client.produce(topic_id, [b"refused"], acks=-1) == ErrorCode.NOT_ENOUGH_REPLICAS
            assert await client.produce(topic_id, [b"acks=1 still works"], acks=1) == ErrorCode.NONE
            hw, seen = await client.fetch(topic_id, 0)
            assert seen == [b"first", b"uncommitted", b"waiting", b"acks=1 still works"]

            for n in (2, 3):
                cluster.brokers[n].replicas.fetchers.resume()
            await cluster.wait_until(lambda: cluster.partition(TOPIC).isr == (1, 2, 3), what="ISR expansion")
            assert await client.produce(topic_id, [b"accepted again"], acks=-1) == ErrorCode.NONE

    run(tmp_path, scenario, **{"replica.lag.time.max.ms": 800})


class Client:
    """Raw Produce and Fetch to one broker with Riverlog's own client connection."""

    def __init__(self, cluster: InProcessCluster, node_id: int) -> None:
        self.port = cluster.ports[node_id]
        self.conn: BrokerConnection | None = None

    async def __aenter__(self) -> Client:
        self.conn = await BrokerConnection.connect("127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.conn is not None
        await self.conn.close()

    async def produce(self, topic_id: uuid.UUID, values: list[bytes], *, acks: int) -> ErrorCode:
        assert self.conn is not None
        batch = build_batch([NewRecord(value=v) for v in values])
        body = {"transactional_id": None, "acks": acks, "timeout_ms": 20_000, "topic_data": [
            {"name": TOPIC, "topic_id": topic_id, "partition_data": [{"index": 0, "records": batch}]}]}
        response = await self.conn.request(ApiKey.PRODUCE, body)
        return ErrorCode(response["responses"][0]["partition_responses"][0]["error_code"])

    async def fetch(self, topic_id: uuid.UUID, offset: int) -> tuple[int, list[bytes]]:
        """(high watermark, values from ``offset``) as a consumer sees them."""
        assert self.conn is not None
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                "topics": [{"topic": TOPIC, "topic_id": topic_id, "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}]}
        response = await self.conn.request(ApiKey.FETCH, body)
        part = response["responses"][0]["partitions"][0]
        assert part["error_code"] == ErrorCode.NONE
        values = [r.value or b"" for _, r in iter_records(bytes(part["records"] or b""))]
        return part["high_watermark"], values


def test_committed_offsets_fail_over_with_their_partition(tmp_path: Path) -> None:
    async def scenario(cluster: InProcessCluster) -> None:
        await create_topic(cluster)
        tp = TopicPartition(TOPIC, 0, 7)

        def commit() -> None:
            consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g", "log_level": 3,
                                 "enable.auto.commit": False})
            try:
                consumer.commit(offsets=[tp], asynchronous=False)
            finally:
                consumer.close()

        def committed() -> int:
            consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g", "log_level": 3,
                                 "enable.auto.commit": False})
            try:
                (result,) = consumer.committed([TopicPartition(TOPIC, 0)], timeout=30)
                return int(result.offset)
            finally:
                consumer.close()

        await asyncio.to_thread(commit)
        coordinator = cluster.brokers[1].coordinator.coordinator_of("g")
        assert coordinator is not None
        offsets_partition = cluster.brokers[1].coordinator.partition_for("g")
        await cluster.crash(coordinator)
        await cluster.fence(coordinator)
        part = cluster.partition(GROUP_METADATA_TOPIC, offsets_partition)
        assert part.leader not in (coordinator, -1)
        assert await asyncio.to_thread(committed) == 7

    run(tmp_path, scenario)


def test_elect_leaders_restores_the_preferred_leader_after_it_returns(tmp_path: Path) -> None:
    async def scenario(cluster: InProcessCluster) -> None:
        topic_id = await create_topic(cluster)
        async with Client(cluster, 1) as client:
            for i in range(10):
                assert await client.produce(topic_id, [b"%d" % i], acks=-1) == ErrorCode.NONE
        await caught_up(cluster, [1, 2, 3])
        epoch_before = cluster.partition(TOPIC).leader_epoch
        # The preferred leader (broker 1, first replica) fails; leadership moves to the ISR.
        await cluster.crash(1)
        await cluster.fence(1)
        await cluster.wait_until(lambda: cluster.partition(TOPIC).leader in (2, 3), what="failover")
        new_leader = cluster.partition(TOPIC).leader
        async with Client(cluster, new_leader) as client:
            assert await client.produce(topic_id, [b"10"], acks=-1) == ErrorCode.NONE
        # It returns, catches up and rejoins the ISR, but does not lead until asked.
        await cluster.start_broker(1)
        await cluster.wait_until(lambda: 1 in cluster.partition(TOPIC).isr, what="broker 1 back in the ISR")
        assert cluster.partition(TOPIC).leader == new_leader

        async with Client(cluster, 2) as client:
            assert client.conn is not None
            response = await client.conn.request(ApiKey.ELECT_LEADERS, {
                "election_type": 0, "timeout_ms": 10_000,
                "topic_partitions": [{"topic": TOPIC, "partitions": [0]}]})
            (result,) = response["replica_election_results"]
            assert result["partition_result"] == [{"partition_id": 0, "error_code": 0, "error_message": None}]
            # Asking again: nothing to do, as Kafka answers.
            again = await client.conn.request(ApiKey.ELECT_LEADERS, {
                "election_type": 0, "timeout_ms": 10_000,
                "topic_partitions": [{"topic": TOPIC, "partitions": [0]}]})
            assert again["replica_election_results"][0]["partition_result"][0]["error_code"] == \
                ErrorCode.ELECTION_NOT_NEEDED
        part = cluster.partition(TOPIC)
        assert part.leader == 1 and part.leader_epoch > epoch_before
        await cluster.wait_until(lambda: replica(cluster, 1).is_leader, what="broker 1 leading")
        async with Client(cluster, 1) as client:
            assert await client.produce(topic_id, [b"11"], acks=-1) == ErrorCode.NONE
            hw, values = await client.fetch(topic_id, 0)
        assert values == [b"%d" % i for i in range(12)] and hw == 12

    run(tmp_path, scenario, **{"replica.lag.time.max.ms": 1000})


def test_cluster_describe_cli_reports_brokers_and_under_replicated_partitions(tmp_path: Path) -> None:
    async def describe(cluster: InProcessCluster) -> dict[str, Any]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "riverlog", "cluster", "describe", "--bootstrap-server", cluster.bootstrap,
            "--output", "json", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "broker_image")})
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        document: dict[str, Any] = json.loads(out)
        return document

    async def scenario(cluster: InProcessCluster) -> None:
        await create_topic(cluster)
        healthy = await describe(cluster)
        assert [b["id"] for b in healthy["brokers"]] == [1, 2, 3]
        assert healthy["partitions"] == 1 and healthy["under_replicated"] == 0 and healthy["offline"] == 0
        (row,) = healthy["partition_details"]
        assert row["replicas"] == [1, 2, 3] and row["isr"] == [1, 2, 3] and row["state"] == "ok"
        # A follower fails: the leader shrinks the ISR and the CLI shows the partition as under-replicated.
        await cluster.crash(3)
        await cluster.fence(3)
        await cluster.wait_until(lambda: 3 not in cluster.partition(TOPIC).isr, what="ISR without broker 3")
        degraded = await describe(cluster)
        assert [b["id"] for b in degraded["brokers"]] == [1, 2]
        assert degraded["under_replicated"] == 1
        assert degraded["partition_details"][0]["state"] == "under-replicated"

    run(tmp_path, scenario, **{"replica.lag.time.max.ms": 1000})
