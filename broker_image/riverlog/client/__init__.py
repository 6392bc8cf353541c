"""Riverlog's own async Kafka client: admin operations, a producer and a consumer.

Built on the sans-I/O codec in :mod:`riverlog.protocol`; shared by the ``riverlog`` CLI and the
Kubernetes operator. It speaks to any Kafka-compatible broker, Riverlog or Apache Kafka.
"""

from __future__ import annotations

from .admin import (
    AdminClient,
    ClusterDescription,
    CommittedOffset,
    ConfigEntry,
    CreatedTopic,
    GroupDescription,
    GroupListing,
    GroupMember,
    ProducerState,
    TransactionDescription,
    TransactionListing,
)
from .cluster import BrokerInfo, Cluster, PartitionInfo, TopicInfo
from .connection import BrokerConnection
from .consumer import Consumer, ConsumerRecord
from .errors import (
    AuthenticationError,
    BrokerError,
    BrokerUnreachableError,
    ClientError,
    ConnectionClosedError,
    RequestTimeoutError,
    UnsupportedApiError,
)
from .offsets import EARLIEST, LATEST, MAX_TIMESTAMP, OffsetInfo
from .partitioner import DefaultPartitioner, murmur2
from .producer import Producer, RecordMetadata

__all__ = [
    "EARLIEST",
    "LATEST",
    "MAX_TIMESTAMP",
    "AdminClient",
    "AuthenticationError",
    "BrokerConnection",
    "BrokerError",
    "BrokerInfo",
    "BrokerUnreachableError",
    "ClientError",
    "Cluster",
    "ClusterDescription",
    "CommittedOffset",
    "ConfigEntry",
    "ConnectionClosedError",
    "Consumer",
    "ConsumerRecord",
    "CreatedTopic",
    "DefaultPartitioner",
    "GroupDescription",
    "GroupListing",
    "GroupMember",
    "OffsetInfo",
    "PartitionInfo",
    "Producer",
    "ProducerState",
    "RecordMetadata",
    "RequestTimeoutError",
    "TopicInfo",
    "TransactionDescription",
    "TransactionListing",
    "UnsupportedApiError",
    "murmur2",
]
