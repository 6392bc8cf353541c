"""Every topic config name Kafka 4 knows is known here too, with Kafka's defaults and checks.

Tools that copy a topic's whole configuration from a Kafka cluster (MirrorMaker 2 syncs every
config it reads, issue #19) send Kafka 4's tiered-storage and compression-level names; the
broker must take them at their Kafka defaults, and refuse what it cannot honour (tiered
storage switched on) or what Kafka refuses (a level out of range) with INVALID_CONFIG. Same code
against both targets.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from support.brokers import BrokerProcess
from support.clients import admin, create_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

# What Kafka 4.3's DescribeConfigs lists for a topic, with its defaults where fixed.
KAFKA4_DEFAULTS = {
    "compression.gzip.level": "-1", "compression.lz4.level": "9", "compression.zstd.level": "3",
    "follower.replication.throttled.replicas": "", "leader.replication.throttled.replicas": "",
    "local.retention.bytes": "-2", "local.retention.ms": "-2", "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false", "remote.storage.enable": "false",
}
KAFKA4_NAMES = {
    "cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
    "flush.ms", "index.interval.bytes", "max.compaction.lag.ms", "max.message.bytes",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "retention.bytes",
    "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable", *KAFKA4_DEFAULTS,
}


@pytest.fixture(scope="module")
def broker(module_broker_factory) -> BrokerProcess:  # type: ignore[no-untyped-def]
    return module_broker_factory()  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def client(broker: BrokerProcess) -> Iterator[AdminClient]:
    yield admin(broker.bootstrap)


def incremental(client: AdminClient, topic: str, **values: str) -> None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
        for name, value in values.items()])
    client.incremental_alter_configs([resource])[resource].result(timeout=30)


def test_every_kafka4_topic_config_is_described_with_kafkas_default(broker: BrokerProcess,
                                                                     client: AdminClient) -> None:
    create_topic(broker.bootstrap, "described", 1)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "described")
    configs = client.describe_configs([resource])[resource].result(timeout=30)
    assert set(configs) >= KAFKA4_NAMES, sorted(KAFKA4_NAMES - set(configs))
    assert {name: configs[name].value or "" for name in KAFKA4_DEFAULTS} == KAFKA4_DEFAULTS


def test_a_copy_of_a_kafka4_topic_config_is_taken(broker: BrokerProcess, client: AdminClient) -> None:
    """What MirrorMaker 2 sends when it syncs a topic's config from a Kafka 4 source."""
    create_topic(broker.bootstrap, "copied", 1)
    incremental(client, "copied", **{name.replace(".", "_"): value for name, value in KAFKA4_DEFAULTS.items()},
                retention_ms="7200000")
    resource = ConfigResource(ConfigResource.Type.TOPIC, "copied")
    assert client.describe_configs([resource])[resource].result(timeout=30)["retention.ms"].value == "7200000"


@pytest.mark.parametrize("name, value", [("remote.storage.enable", "true"), ("compression.zstd.level", "99"),
                                         ("compression.lz4.level", "0"), ("local.retention.ms", "-3")])
def test_what_cannot_be_honoured_or_is_out_of_range_is_refused(broker: BrokerProcess, client: AdminClient,
                                                               name: str, value: str) -> None:
    topic = "refused-" + name.replace(".", "-")
    create_topic(broker.bootstrap, topic, 1)
    with pytest.raises(KafkaException) as raised:
        incremental(client, topic, **{name.replace(".", "_"): value})
    assert raised.value.args[0].code() == KafkaError.INVALID_CONFIG, raised.value
