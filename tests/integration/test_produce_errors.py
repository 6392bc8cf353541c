"""Produce-path errors a client must see as Kafka's error codes, never as a hang or a crash."""

from __future__ import annotations

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import MessageSizeTooLargeError

pytestmark = pytest.mark.integration


def test_min_insync_capped_at_replication_factor_and_oversized_batches_refused(broker_factory) -> None:
    broker = broker_factory(overrides={"auto.create.topics.enable": "false"})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("strict", 1, 1, topic_configs={"min.insync.replicas": "2"}),
                         NewTopic("small", 1, 1, topic_configs={"max.message.bytes": "1000"})])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=0,
                             enable_idempotence=False, max_block_ms=10_000)
    try:
        # Kafka 4 caps the effective min ISR at the replication factor (KIP-966), so an RF=1
        # topic with min.insync.replicas=2 accepts acks=all; the cluster tier tests the real
        # NOT_ENOUGH_REPLICAS case with several brokers.
        assert producer.send("strict", b"x").get(timeout=15).offset == 0
        # A batch over the topic's max.message.bytes: MESSAGE_TOO_LARGE.
        with pytest.raises(MessageSizeTooLargeError):
            producer.send("small", b"z" * 5000).get(timeout=15)
    finally:
        producer.close()
