"""Single-node mode is a one-voter Raft metadata quorum (as KRaft runs a lone combined node), and
a data folder written by the earlier single-node format (JSON lines in
``__cluster_metadata-0/records.jsonl``) is carried over on start, or refused with the fix when it
holds two histories.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from riverlog.broker import Broker
from riverlog.client.admin import AdminClient
from riverlog.config import BrokerConfig
from riverlog.controller.local import LocalController, read_or_create_cluster_id
from riverlog.controller.quorum.legacy_single_node import LegacyMetadataError
from riverlog.controller.records import Endpoint
from riverlog.controller.topic_ops import NewTopic
from riverlog.protocol.errors import ErrorCode
from support.brokers import free_ports

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]


def single_node_config(data: Path, port: int) -> BrokerConfig:
    # No controller.quorum.voters: single-node mode, exactly what `make run` starts.
    return BrokerConfig({"node.id": "1", "log.dirs": str(data), "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                         "metrics.port": "0", "offsets.topic.replication.factor": "1"})


def with_broker(config: BrokerConfig, scenario: Callable[[Broker], Awaitable[None]]) -> None:
    async def main() -> None:
        broker = Broker(config)
        await broker.start()
        try:
            await scenario(broker)
        finally:
            await broker.stop()

    asyncio.run(main())


def test_a_lone_broker_is_the_only_voter_of_its_own_quorum_and_keeps_its_topics(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    config = single_node_config(tmp_path / "data", port)

    async def first_life(broker: Broker) -> None:
        quorum = broker.quorum
        assert quorum is not None and broker.controller is quorum
        assert quorum.driver.node.voters == {1} and quorum.driver.is_leader and quorum.is_active
        async with AdminClient(f"127.0.0.1:{port}") as admin:
            await admin.create_topic("kept", 2, 1)
            # DescribeQuorum answers as on any quorum (kafka-metadata-quorum describe --status).
            described = await admin.describe_quorum()
        assert described is not None and described.leader_id == 1
        assert [v.node_id for v in described.voters] == [1] and described.observers == ()
        assert "kept" in broker.image.topics

    with_broker(config, first_life)
    metadata = tmp_path / "data" / "__cluster_metadata-0"
    assert (metadata / "raft.log").exists() and (metadata / "quorum-state").exists()
    assert not (metadata / "records.jsonl").exists()

    async def second_life(broker: Broker) -> None:
        assert broker.quorum is not None and broker.quorum.driver.is_leader
        topic = broker.image.topics["kept"]
        assert len(topic.partitions) == 2 and topic.partitions[0].leader == 1

    with_broker(config, second_life)


def write_legacy_folder(data: Path) -> None:
    """A data folder as the earlier single-node mode left it: its local controller's records."""
    async def main() -> None:
        cluster_id = read_or_create_cluster_id(data, 1, "")
        controller = LocalController(data / "__cluster_metadata-0", 1, cluster_id)
        controller.replay()
        epoch = await controller.register_broker(1, "old", [Endpoint("PLAINTEXT", "127.0.0.1", 1)], None)
        await controller.heartbeat(1, epoch)
        for name in ("orders", "payments"):
            (outcome,) = await controller.create_topics([NewTopic(name, 3, 1, configs={"retention.ms": "60000"})],
                                                        validate_only=False, default_partitions=1,
                                                        default_replication=1)
            assert outcome.error == ErrorCode.NONE
        await controller.allocate_producer_id(1)

    asyncio.run(main())


def test_an_old_single_node_folder_is_carried_over_on_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_legacy_folder(data)
    metadata = data / "__cluster_metadata-0"
    assert (metadata / "records.jsonl").exists()
    (port,) = free_ports(1)
    config = single_node_config(data, port)
    seen: dict[str, object] = {}

    async def scenario(broker: Broker) -> None:
        image = broker.image
        seen["topics"] = {name: (len(t.partitions), t.topic_id) for name, t in image.topics.items()}
        seen["retention"] = image.topic_configs("orders").get("retention.ms")
        seen["next_pid"] = image.next_producer_id

    with_broker(config, scenario)
    topics = seen["topics"]
    assert isinstance(topics, dict) and {n: c for n, (c, _) in topics.items()} == {"orders": 3, "payments": 3}
    assert seen["retention"] == "60000"
    assert isinstance(seen["next_pid"], int) and seen["next_pid"] > 0  # producer ids never repeat
    assert not (metadata / "records.jsonl").exists() and (metadata / "records.jsonl.migrated").exists()

    # The next start reads the quorum's storage only: same topics, same ids.
    async def again(broker: Broker) -> None:
        assert {name: (len(t.partitions), t.topic_id) for name, t in broker.image.topics.items()} == topics

    with_broker(config, again)


def test_a_folder_with_two_metadata_histories_is_refused_with_the_fix(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (port,) = free_ports(1)
    config = single_node_config(data, port)

    async def nothing(broker: Broker) -> None:
        pass

    with_broker(config, nothing)  # a quorum log now exists
    write_legacy_folder(data)  # and an old records file beside it
    with pytest.raises(LegacyMetadataError, match="remove raft.log and quorum-state"):
        Broker(config)
