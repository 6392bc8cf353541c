"""The Raft metadata quorum between real brokers in one process (each its own quorum replica,
real TCP on loopback): election of one active controller, topic creation (and client quotas)
from any broker, controller failover, observers (brokers that do not vote) and a full restart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from riverlog.broker import Broker
from riverlog.config import BrokerConfig
from riverlog.controller.client_quotas import QuotaAlteration, QuotaOp
from riverlog.controller.topic_ops import NewTopic
from riverlog.controller_node import ControllerNode
from riverlog.protocol.errors import ErrorCode
from riverlog.quotas.manager import QuotaKind
from support.brokers import free_ports
from support.quorum_cluster import QuorumCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]


def run(tmp_path: Path, scenario: Callable[[QuorumCluster], Awaitable[None]], size: int = 3,
        voters: int | None = None, overrides: dict[str, object] | None = None) -> None:
    async def main() -> None:
        cluster = QuorumCluster(tmp_path, size, overrides, voters=voters)
        await cluster.start()
        try:
            await scenario(cluster)
        finally:
            await cluster.stop()

    asyncio.run(main())


async def create_topic(cluster: QuorumCluster, via: int, name: str, partitions: int = 3, rf: int = 3) -> None:
    (outcome,) = await cluster.brokers[via].controller.create_topics(
        [NewTopic(name, partitions, rf, configs={"min.insync.replicas": "2"})],
        validate_only=False, default_partitions=1, default_replication=3)
    assert outcome.error == ErrorCode.NONE, outcome.message
    # The call returns once the calling broker's own image has the topic.
    assert name in cluster.brokers[via].controller.image.topics
    await cluster.wait_until(lambda: all(name in img.topics for img in cluster.images().values()),
                             what=f"{name} in every broker's image")


def produce_and_read(bootstrap: str, topic: str, count: int) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, key=b"%d" % i, value=b"v%d" % i, partition=i % 3)
    assert producer.flush(30) == 0
    return read_all(bootstrap, topic, count)


def read_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "q", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            seen.append(msg.value())
    consumer.close()
    return seen


def test_one_active_controller_and_topics_from_any_broker(tmp_path: Path) -> None:
    async def scenario(cluster: QuorumCluster) -> None:
        await cluster.wait_until(lambda: cluster.active_controller() is not None, what="an active controller")
        active = cluster.active_controller()
        # Every broker learns the same controller, and every broker is registered and unfenced.
        await cluster.wait_until(lambda: {b.controller.controller_id for b in cluster.brokers.values()} == {active},
                                 what="every broker naming the active controller")
        await cluster.wait_until(lambda: all(img.live_broker_ids() == {1, 2, 3} for img in cluster.images().values()),
                                 what="three live brokers in every image")
        followers = [n for n in cluster.brokers if n != active]
        await create_topic(cluster, followers[0], "from-follower")  # forwarded to the controller
        await create_topic(cluster, active, "from-controller")
        seen = await asyncio.to_thread(produce_and_read, cluster.bootstrap, "from-follower", 300)
        assert sorted(seen) == sorted(b"v%d" % i for i in range(300))

    run(tmp_path, scenario)


def test_controller_crash_elects_another_and_topic_creation_goes_on(tmp_path: Path) -> None:
    async def scenario(cluster: QuorumCluster) -> None:
        await cluster.wait_until(lambda: cluster.active_controller() is not None, what="an active controller")
        first = cluster.active_controller()
        assert first is not None
        await create_topic(cluster, first, "before")
        await cluster.crash(first)
        await cluster.wait_until(lambda: cluster.active_controller() not in (None, first), timeout=30,
                                 what="a new active controller")
        # The crashed broker is fenced by the new controller (its session expired).
        await cluster.wait_until(
            lambda: all(first not in img.live_broker_ids() for img in cluster.images().values()),
            what="the crashed broker fenced")
        survivor = next(iter(cluster.brokers))
        await create_topic(cluster, survivor, "after", rf=2)  # two brokers are left
        # The crashed node comes back, catches up on the log it missed, and is unfenced.
        await cluster.start_broker(first)
        await cluster.wait_until(lambda: "after" in cluster.brokers[first].controller.image.topics,
                                 what="the restarted node applying what it missed")
        await cluster.wait_until(lambda: first in cluster.brokers[first].controller.image.live_broker_ids(),
                                 what="the restarted node unfenced")

    run(tmp_path, scenario)


def test_observer_broker_follows_the_log_and_forwards_calls(tmp_path: Path) -> None:
    async def scenario(cluster: QuorumCluster) -> None:
        observer = cluster.brokers[4]
        assert observer.quorum is not None and 4 not in observer.quorum.voter_ids
        await create_topic(cluster, 4, "from-observer")
        await cluster.wait_until(lambda: 4 in observer.controller.image.live_broker_ids(),
                                 what="the observer registered and unfenced")
        # Client quotas too: decided by the active controller, in every broker's image and quota
        # manager once applied there.
        (outcome,) = await observer.controller.alter_client_quotas(
            [QuotaAlteration((("user", "alice"),), (QuotaOp("producer_byte_rate", 1024),))], validate_only=False)
        assert outcome.error == ErrorCode.NONE
        assert observer.controller.image.client_quotas == {(("user", "alice"),): {"producer_byte_rate": 1024.0}}
        await cluster.wait_until(lambda: all(b.client_quotas.enabled(QuotaKind.PRODUCE)
                                             for b in cluster.brokers.values()),
                                 what="the quota in every broker's quota manager")

    run(tmp_path, scenario, size=4, voters=3)


def test_full_restart_keeps_topics_configs_and_data(tmp_path: Path) -> None:
    async def scenario(cluster: QuorumCluster) -> None:
        await create_topic(cluster, 1, "durable")
        (outcome,) = [await cluster.brokers[2].controller.alter_topic_configs(
            "durable", {"retention.ms": "123456"}, replace_all=False, validate_only=False)]
        assert outcome.error == ErrorCode.NONE
        seen = await asyncio.to_thread(produce_and_read, cluster.bootstrap, "durable", 90)
        assert len(seen) == 90
        await cluster.stop()
        await cluster.start()
        for img in cluster.images().values():
            assert img.topic_configs("durable").get("retention.ms") == "123456"
        # Leaders come back as the brokers re-register; read once every partition has one.
        await cluster.wait_until(lambda: all(
            p.leader in img.live_broker_ids() for img in cluster.images().values()
            for p in img.topics["durable"].partitions.values()), timeout=60, what="leaders after the restart")
        seen = await asyncio.to_thread(read_all, cluster.bootstrap, "durable", 90)
        assert sorted(seen) == sorted(b"v%d" % i for i in range(90))

    run(tmp_path, scenario)


def test_dedicated_controllers_and_broker_only_nodes(tmp_path: Path) -> None:
    """process.roles=controller on three voters, process.roles=broker on two observers: topics,
    data and a controller failover, with no broker ever voting."""

    async def main() -> None:
        picked = free_ports(5)
        controller_ports = {n: picked[n - 1] for n in (1, 2, 3)}
        client_ports = {n: picked[n - 1] for n in (4, 5)}
        voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in controller_ports.items())
        common = {"controller.quorum.voters": voters, "metrics.host": "127.0.0.1", "metrics.port": "0",
                  "offsets.topic.num.partitions": "3"}
        controllers = {n: ControllerNode(BrokerConfig({
            **common, "node.id": str(n), "process.roles": "controller",
            "listeners": f"CONTROLLER://127.0.0.1:{p}", "log.dirs": str(tmp_path / f"controller{n}")}))
            for n, p in controller_ports.items()}
        # The brokers (observers) notice a lost metadata leader only after their fetch timeout,
        # here well past the 1.5 s session timeout: their heartbeats must not wait for their
        # metadata to catch up, or the new controller fences them (a CI failure once).
        brokers = {n: Broker(BrokerConfig({
            **common, "node.id": str(n), "process.roles": "broker", "controller.quorum.fetch.timeout.ms": "4000",
            "listeners": f"PLAINTEXT://127.0.0.1:{p}", "log.dirs": str(tmp_path / f"broker{n}")}))
            for n, p in client_ports.items()}
        await asyncio.gather(*(c.start() for c in controllers.values()), *(b.start() for b in brokers.values()))
        try:
            def active() -> int | None:
                ids = [n for n, c in controllers.items() if c.quorum is not None and c.quorum.is_active]
                return ids[0] if len(ids) == 1 else None

            await wait_for(lambda: active() is not None, "an active controller")
            await wait_for(lambda: all(b.controller.image.live_broker_ids() == {4, 5} for b in brokers.values()),
                           "both brokers registered and unfenced")
            (outcome,) = await brokers[4].controller.create_topics(
                [NewTopic("dedicated", 3, 2)], validate_only=False, default_partitions=1, default_replication=2)
            assert outcome.error == ErrorCode.NONE, outcome.message
            bootstrap = ",".join(f"127.0.0.1:{p}" for p in client_ports.values())
            seen = await asyncio.to_thread(produce_and_read, bootstrap, "dedicated", 90)
            assert sorted(seen) == sorted(b"v%d" % i for i in range(90))
            # The active controller dies; another one takes over and the brokers keep going.
            first = active()
            assert first is not None
            await controllers.pop(first).halt()
            await wait_for(lambda: active() not in (None, first), "a new active controller")
            # The brokers find the new controller (asking the other voters when the old one is
            # unreachable) and keep their sessions; a moment's fencing is allowed for.
            await wait_for(lambda: all(b.controller.image.live_broker_ids() == {4, 5} for b in brokers.values()),
                           "both brokers live under the new controller")
            (outcome,) = await brokers[5].controller.create_topics(
                [NewTopic("after", 1, 2)], validate_only=False, default_partitions=1, default_replication=2)
            assert outcome.error == ErrorCode.NONE, outcome.message
            assert brokers[4].controller.image.live_broker_ids() == {4, 5}
        finally:
            for broker in brokers.values():
                await broker.stop()
            for node in controllers.values():
                await node.stop()

    asyncio.run(main())


async def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.02)


def test_a_call_left_unanswered_by_a_deposed_controller_goes_to_the_new_one(tmp_path: Path) -> None:
    # A controller cut off from the quorum never answers the calls already sent to it (a broker's
    # heartbeat among them). The caller must ask the new controller once it learns of the new
    # epoch, not wait out the request timeout: a heartbeat stuck that long gets its broker fenced.
    async def scenario(cluster: QuorumCluster) -> None:
        await cluster.wait_until(lambda: cluster.active_controller() is not None, what="an active controller")
        first = cluster.active_controller()
        assert first is not None
        deposed = cluster.brokers[first].controller
        caller = next(n for n in cluster.brokers if n != first)
        arrived = asyncio.Event()
        answer = deposed.serve_call

        async def unanswered_once(*args: Any) -> Any:
            if not arrived.is_set():
                arrived.set()
                await asyncio.Event().wait()  # never answers this one
            return await answer(*args)

        deposed.serve_call = unanswered_once  # type: ignore[method-assign]
        call = asyncio.create_task(create_topic(cluster, caller, "asked-again"))
        await asyncio.wait_for(arrived.wait(), 20)
        assert deposed.driver.resign()  # a new epoch; the call above is still unanswered
        # Without asking again the call would fail when its request times out, which is also
        # how long the caller is willing to wait for a controller (CALL_TIMEOUT_S).
        await call

    run(tmp_path, scenario)


async def _live_everywhere(cluster: QuorumCluster) -> int:
    await cluster.wait_until(lambda: cluster.active_controller() is not None, what="an active controller")
    await cluster.wait_until(lambda: all(img.live_broker_ids() == {1, 2, 3} for img in cluster.images().values()),
                             what="three live brokers in every image")
    active = cluster.active_controller()
    assert active is not None
    return active


def test_a_broker_whose_process_is_gone_is_fenced_before_its_session_expires(tmp_path: Path) -> None:
    # The session lasts a minute: within this test only the probe of the late broker's listener
    # (refused: nothing listens there any more) can fence it.
    async def scenario(cluster: QuorumCluster) -> None:
        active = await _live_everywhere(cluster)
        victim = next(n for n in cluster.brokers if n != active)
        await cluster.crash(victim)
        await cluster.wait_until(lambda: all(victim not in img.live_broker_ids() for img in cluster.images().values()),
                                 timeout=20, what=f"broker {victim} fenced")

    run(tmp_path, scenario, overrides={"broker.session.timeout.ms": 60_000})


def test_a_silent_broker_that_still_listens_keeps_its_session(tmp_path: Path) -> None:
    # Heartbeats stop but the listener still accepts (as for a paused process): the probe proves
    # nothing, so the broker stays live until its session expires.
    async def scenario(cluster: QuorumCluster) -> None:
        active = await _live_everywhere(cluster)
        victim = next(n for n in cluster.brokers if n != active)
        silenced = [t for t in cluster.brokers[victim]._tasks if t.get_coro().__name__ == "_heartbeat_loop"]
        assert len(silenced) == 1
        silenced[0].cancel()
        await asyncio.sleep(3)  # six heartbeat intervals: several probes
        assert victim in cluster.brokers[active].controller.image.live_broker_ids()
        await cluster.wait_until(lambda: victim not in cluster.brokers[active].controller.image.live_broker_ids(),
                                 timeout=20, what=f"broker {victim} fenced when its session expired")

    run(tmp_path, scenario, overrides={"broker.session.timeout.ms": 6_000})
