"""Group-level configs (resource type GROUP) set with Kafka's ``kafka-configs.sh --entity-type
groups``, used by Java's KafkaShareConsumer -- on Riverlog as on Kafka 4.3.1.

Records are produced before the share group exists; ``share.auto.offset.reset=earliest`` and
``share.delivery.count.limit=2`` are set on the group before its consumer joins, so the consumer
receives the earlier records (a share group starts at the log end otherwise) and a record released
every time is archived after two deliveries (the broker's limit is 5). Describing the group's
configs shows the overrides; bad values and unknown names are refused with INVALID_CONFIG.
Deleting a group leaves its configs in place, on both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from support.brokers import BrokerProcess
from support.java_programs import JavaPrograms
from support.java_tools import JavaTools
from support.share_client import WAIT_S, poll

pytestmark = pytest.mark.integration

GROUP = "configured-group"


@pytest.fixture
def share_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    # Kafka's default bounds; named so that both targets are given the same ones.
    return broker_factory(overrides={"group.share.min.record.lock.duration.ms": 15000,
                                     "group.share.max.record.lock.duration.ms": 60000})


def group_configs(tools: JavaTools, broker: BrokerProcess, *args: str, group: str = GROUP) -> Any:
    """kafka-configs.sh on one group's configs (--describe, or --alter with its options)."""
    return tools.configs(broker.bootstrap, "--entity-type", "groups", "--entity-name", group, *args, check=False)


def alter(tools: JavaTools, broker: BrokerProcess, *args: str) -> Any:
    return group_configs(tools, broker, "--alter", *args)


def test_group_configs_set_with_kafka_configs_drive_a_share_consumer(
        share_broker: BrokerProcess, java_tools: JavaTools, kafka_libs: Path, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": share_broker.bootstrap})
    admin.create_topics([NewTopic("backlog", 1, 1)])["backlog"].result(15)

    refused = {
        "share.auto.offset.reset=sometimes": "share.auto.offset.reset",
        "share.record.lock.duration.ms=120000":
            "share.record.lock.duration.ms must be less than or equal to group.share.max.record.lock.duration.ms",
        "share.no.such.config=1": "Unknown group config name: share.no.such.config",
    }
    for config, message in refused.items():
        result = alter(java_tools, share_broker, "--add-config", config)
        output = result.stdout + result.stderr
        assert result.returncode != 0 and "InvalidConfigurationException" in output, result.describe()
        assert message in output, result.describe()

    ok = alter(java_tools, share_broker, "--add-config",
               "share.auto.offset.reset=earliest,share.delivery.count.limit=2")
    assert ok.returncode == 0, ok.describe()
    described = group_configs(java_tools, share_broker, "--describe").stdout
    assert "share.auto.offset.reset=earliest" in described, described
    assert "share.delivery.count.limit=2" in described, described
    # Nothing refused was stored.
    assert "share.record.lock.duration.ms" not in described and "share.no.such.config" not in described, described

    programs = JavaPrograms(kafka_libs)
    with programs.session("ShareClient", [share_broker.bootstrap], log_path=tmp_path / "client.log") as s:
        # Produced before the group exists: only share.auto.offset.reset=earliest delivers them.
        s.call("produce", "backlog", 0, "old-keep", "old-again", "old-last")
        s.call("consumer", "c1", GROUP, "backlog")
        deliveries: dict[str, list[int]] = {}
        deadline = time.monotonic() + WAIT_S
        # "old-again" is released every time: with the group's limit of 2 it is archived after
        # its second delivery.
        while len(deliveries.get("old-again", [])) < 2 or "old-last" not in deliveries:
            assert time.monotonic() < deadline, deliveries
            for r in poll(s, "c1", **{"old-again": "release"}):
                deliveries.setdefault(r["value"], []).append(r["delivery_count"])
        s.call("produce", "backlog", 0, "new")
        while "new" not in deliveries:
            assert time.monotonic() < deadline, deliveries
            for r in poll(s, "c1", **{"old-again": "release"}):
                deliveries.setdefault(r["value"], []).append(r["delivery_count"])
    assert deliveries == {"old-keep": [1], "old-again": [1, 2], "old-last": [1], "new": [1]}

    # Deleting the override brings the default back.
    deleted = alter(java_tools, share_broker, "--delete-config", "share.delivery.count.limit")
    assert deleted.returncode == 0, deleted.describe()
    after = group_configs(java_tools, share_broker, "--describe").stdout
    assert "share.delivery.count.limit" not in after and "share.auto.offset.reset=earliest" in after, after


def test_deleting_a_group_keeps_its_configs(share_broker: BrokerProcess, java_tools: JavaTools) -> None:
    # Group configs are cluster metadata, not group state: Kafka 4.3.1 keeps them when the group
    # is deleted (a group of that name made again gets them), and so does Riverlog.
    doomed = "doomed-group"
    admin = AdminClient({"bootstrap.servers": share_broker.bootstrap})
    admin.create_topics([NewTopic("doomed-topic", 1, 1)])["doomed-topic"].result(15)
    added = group_configs(java_tools, share_broker, "--alter", "--add-config", "consumer.session.timeout.ms=50000",
                          group=doomed)
    assert added.returncode == 0, added.describe()
    consumer = Consumer({"bootstrap.servers": share_broker.bootstrap, "group.id": doomed,
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("doomed-topic", 0, 0)], asynchronous=False)
    consumer.close()
    admin.delete_consumer_groups([doomed])[doomed].result(15)
    assert doomed not in {g.group_id for g in admin.list_consumer_groups().result(15).valid}
    described = group_configs(java_tools, share_broker, "--describe", group=doomed).stdout
    assert "consumer.session.timeout.ms=50000" in described, described
