"""CreateTopics (key 19): create topics with a partition count and replication factor, or with an
explicit replica assignment.

Valid versions 2-7 (Kafka 4.0 removed versions 0-1, KIP-896; their fields are still declared
from version 0, as in the spec, so widening the range would bring them back). Version 5 is the
first flexible version.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT8, INT16, INT32, STRING, UUID, Array, Struct, f, message

_CREATABLE_REPLICA_ASSIGNMENT = Struct(
    [
        f("partition_index", INT32),
        f("broker_ids", Array(INT32)),
    ]
)
_CREATABLE_TOPIC_CONFIG = Struct(
    [
        f("name", STRING),
        f("value", STRING, nullable="0+"),
    ]
)
_CREATABLE_TOPIC = Struct(
    [
        f("name", STRING),
        f("num_partitions", INT32),
        f("replication_factor", INT16),
        f("assignments", Array(_CREATABLE_REPLICA_ASSIGNMENT)),
        f("configs", Array(_CREATABLE_TOPIC_CONFIG)),
    ]
)

REQUEST = message(
    "CreateTopicsRequest",
    ApiKey.CREATE_TOPICS,
    "2-7",
    "5+",
    [
        f("topics", Array(_CREATABLE_TOPIC)),
        f("timeout_ms", INT32, default=60000),
        f("validate_only", BOOL, "1+"),
    ],
)

_CREATABLE_TOPIC_CONFIGS = Struct(
    [
        f("name", STRING, "5+"),
        f("value", STRING, "5+", nullable="5+"),
        f("read_only", BOOL, "5+"),
        f("config_source", INT8, "5+", default=-1),
        f("is_sensitive", BOOL, "5+"),
    ]
)
_CREATABLE_TOPIC_RESULT = Struct(
    [
        f("name", STRING),
        f("topic_id", UUID, "7+"),
        f("error_code", INT16),
        f("error_message", STRING, "1+", nullable="0+"),
        f("topic_config_error_code", INT16, "5+", tag=0, tagged="5+"),
        f("num_partitions", INT32, "5+", default=-1),
        f("replication_factor", INT16, "5+", default=-1),
        f("configs", Array(_CREATABLE_TOPIC_CONFIGS), "5+", nullable="5+"),
    ]
)

RESPONSE = message(
    "CreateTopicsResponse",
    ApiKey.CREATE_TOPICS,
    "2-7",
    "5+",
    [
        f("throttle_time_ms", INT32, "2+"),
        f("topics", Array(_CREATABLE_TOPIC_RESULT)),
    ],
)
