"""Metadata (key 3): brokers, topics, partitions and their leaders.

Kafka 4.x: valid versions 0-13, flexible from 9. ``topics`` is nullable from version 1: null asks
for every topic, an empty array for none (in version 0 an empty array means every topic). Version
10 adds topic ids (usable from 12), 13 a top-level error code; cluster authorized operations exist
only in versions 8-10 (DescribeCluster carries them since).
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT16, INT32, NULL, STRING, UUID, Array, Struct, f, message

_METADATA_REQUEST_TOPIC = Struct(
    [
        f("topic_id", UUID, "10+"),
        f("name", STRING, nullable="10+"),
    ]
)

REQUEST = message(
    "MetadataRequest",
    ApiKey.METADATA,
    "0-13",
    "9+",
    [
        f("topics", Array(_METADATA_REQUEST_TOPIC), nullable="1+"),
        f("allow_auto_topic_creation", BOOL, "4+", default=True),
        f("include_cluster_authorized_operations", BOOL, "8-10"),
        f("include_topic_authorized_operations", BOOL, "8+"),
    ],
)

# Kafka's "no authorized operations requested" sentinel (Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -2147483648

_METADATA_RESPONSE_BROKER = Struct(
    [
        f("node_id", INT32),
        f("host", STRING),
        f("port", INT32),
        f("rack", STRING, "1+", nullable="1+", default=NULL),
    ]
)
_METADATA_RESPONSE_PARTITION = Struct(
    [
        f("error_code", INT16),
        f("partition_index", INT32),
        f("leader_id", INT32),
        f("leader_epoch", INT32, "7+", default=-1),
        f("replica_nodes", Array(INT32)),
        f("isr_nodes", Array(INT32)),
        f("offline_replicas", Array(INT32), "5+"),
    ]
)
_METADATA_RESPONSE_TOPIC = Struct(
    [
        f("error_code", INT16),
        f("name", STRING, nullable="12+"),
        f("topic_id", UUID, "10+"),
        f("is_internal", BOOL, "1+", default=False),
        f("partitions", Array(_METADATA_RESPONSE_PARTITION)),
        f("topic_authorized_operations", INT32, "8+", default=AUTHORIZED_OPERATIONS_OMITTED),
    ]
)

RESPONSE = message(
    "MetadataResponse",
    ApiKey.METADATA,
    "0-13",
    "9+",
    [
        f("throttle_time_ms", INT32, "3+"),
        f("brokers", Array(_METADATA_RESPONSE_BROKER)),
        f("cluster_id", STRING, "2+", nullable="2+", default=NULL),
        f("controller_id", INT32, "1+", default=-1),
        f("topics", Array(_METADATA_RESPONSE_TOPIC)),
        f("cluster_authorized_operations", INT32, "8-10", default=AUTHORIZED_OPERATIONS_OMITTED),
        f("error_code", INT16, "13+"),
    ],
)
