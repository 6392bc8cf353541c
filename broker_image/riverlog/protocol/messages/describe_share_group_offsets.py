"""DescribeShareGroupOffsets (key 90): an admin asks for share groups' start offsets per
partition (the share-partition start offset, the point below which every record is done), and
from version 1 their lag (KIP-1226). A null topic list asks for every topic the group has state
for. Versions 0-1, flexible.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, INT64, NULL, STRING, UUID, Array, Struct, f, message

_REQUEST_TOPIC = Struct(
    [
        f("topic_name", STRING),
        f("partitions", Array(INT32)),
    ]
)

REQUEST = message(
    "DescribeShareGroupOffsetsRequest",
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    "0-1",
    "0+",
    [
        f(
            "groups",
            Array(
                Struct(
                    [
                        f("group_id", STRING),
                        f("topics", Array(_REQUEST_TOPIC), nullable="0+"),
                    ]
                )
            ),
        )
    ],
)

_PARTITION = Struct(
    [
        f("partition_index", INT32),
        f("start_offset", INT64),
        f("leader_epoch", INT32),
        f("lag", INT64, "1+", default=-1),
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
_GROUP = Struct(
    [
        f("group_id", STRING),
        f("topics", Array(_TOPIC)),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=NULL),
    ]
)

RESPONSE = message(
    "DescribeShareGroupOffsetsResponse",
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    "0-1",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("groups", Array(_GROUP)),
    ],
)
