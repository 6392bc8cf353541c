"""Which ``__transaction_state`` partition (and so which broker) coordinates a transactional id.

As for groups: Kafka's ``Utils.abs(transactionalId.hashCode) % partitionCount``, Java's
``String.hashCode`` exactly, so an id lands on the partition Kafka would put it on.
"""

from __future__ import annotations

from ..controller.topic_names import TRANSACTION_STATE_TOPIC
from ..coordinator.placement import java_string_hashcode, kafka_abs

__all__ = ["TRANSACTION_STATE_TOPIC", "partition_for"]


def partition_for(transactional_id: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hashcode(transactional_id)) % num_partitions
