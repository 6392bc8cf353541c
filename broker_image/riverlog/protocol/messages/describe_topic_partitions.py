"""DescribeTopicPartitions (key 75): topic and partition metadata, paged with a cursor (KIP-966),
including eligible leader replicas.

Valid version 0 only, which is flexible.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT16, INT32, NULL, STRING, UUID, Array, Struct, f, message

_TOPIC_REQUEST = Struct([f("name", STRING)])
_CURSOR = Struct(
    [
        f("topic_name", STRING),
        f("partition_index", INT32),
    ]
)

REQUEST = message(
    "DescribeTopicPartitionsRequest",
    ApiKey.DESCRIBE_TOPIC_PARTITIONS,
    "0",
    "0+",
    [
        f("topics", Array(_TOPIC_REQUEST)),
        f("response_partition_limit", INT32, default=2000),
        f("cursor", _CURSOR, nullable="0+", default=NULL),
    ],
)

_DESCRIBE_TOPIC_PARTITIONS_RESPONSE_PARTITION = Struct(
    [
        f("error_code", INT16),
        f("partition_index", INT32),
        f("leader_id", INT32),
        f("leader_epoch", INT32, default=-1),
        f("replica_nodes", Array(INT32)),
        f("isr_nodes", Array(INT32)),
        f("eligible_leader_replicas", Array(INT32), nullable="0+", default=NULL),
        f("last_known_elr", Array(INT32), nullable="0+", default=NULL),
        f("offline_replicas", Array(INT32)),
    ]
)
_DESCRIBE_TOPIC_PARTITIONS_RESPONSE_TOPIC = Struct(
    [
        f("error_code", INT16),
        f("name", STRING, nullable="0+"),
        f("topic_id", UUID),
        f("is_internal", BOOL),
        f("partitions", Array(_DESCRIBE_TOPIC_PARTITIONS_RESPONSE_PARTITION)),
        f("topic_authorized_operations", INT32, default=-2147483648),
    ]
)

RESPONSE = message(
    "DescribeTopicPartitionsResponse",
    ApiKey.DESCRIBE_TOPIC_PARTITIONS,
    "0",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("topics", Array(_DESCRIBE_TOPIC_PARTITIONS_RESPONSE_TOPIC)),
        f("next_cursor", _CURSOR, nullable="0+", default=NULL),
    ],
)
