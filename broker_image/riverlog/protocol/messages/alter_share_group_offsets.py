"""AlterShareGroupOffsets (key 91): an admin resets an empty share group's start offsets per
partition (the records from there on become available again). Version 0, flexible.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, INT64, NULL, STRING, UUID, Array, Struct, f, message

_REQUEST_TOPIC = Struct(
    [
        f("topic_name", STRING),
        f("partitions", Array(Struct([f("partition_index", INT32), f("start_offset", INT64)]))),
    ]
)

REQUEST = message(
    "AlterShareGroupOffsetsRequest",
    ApiKey.ALTER_SHARE_GROUP_OFFSETS,
    "0",
    "0+",
    [
        f("group_id", STRING),
        f("topics", Array(_REQUEST_TOPIC)),
    ],
)

_PARTITION = Struct(
    [
        f("partition_index", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=NULL),
    ]
)
_TOPIC = Struct(
    [
        f("topic_name", STRING),
        f("topic_id", UUID),
        f("partitions", Array(_PARTITION)),
    ]
)

RESPONSE = message(
    "AlterShareGroupOffsetsResponse",
    ApiKey.ALTER_SHARE_GROUP_OFFSETS,
    "0",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=NULL),
        f("responses", Array(_TOPIC)),
    ],
)
