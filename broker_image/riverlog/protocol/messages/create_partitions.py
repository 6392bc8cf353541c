"""CreatePartitions (key 37): raise the partition count of existing topics.

Valid versions 0-3; version 2 is the first flexible version.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT16, INT32, NULL, STRING, Array, Struct, f, message

_CREATE_PARTITIONS_ASSIGNMENT = Struct([f("broker_ids", Array(INT32))])
_CREATE_PARTITIONS_TOPIC = Struct(
    [
        f("name", STRING),
        f("count", INT32),
        f("assignments", Array(_CREATE_PARTITIONS_ASSIGNMENT), nullable="0+"),
    ]
)

REQUEST = message(
    "CreatePartitionsRequest",
    ApiKey.CREATE_PARTITIONS,
    "0-3",
    "2+",
    [
        f("topics", Array(_CREATE_PARTITIONS_TOPIC)),
        f("timeout_ms", INT32),
        f("validate_only", BOOL),
    ],
)

_CREATE_PARTITIONS_TOPIC_RESULT = Struct(
    [
        f("name", STRING),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=NULL),
    ]
)

RESPONSE = message(
    "CreatePartitionsResponse",
    ApiKey.CREATE_PARTITIONS,
    "0-3",
    "2+",
    [
        f("throttle_time_ms", INT32),
        f("results", Array(_CREATE_PARTITIONS_TOPIC_RESULT)),
    ],
)
