"""ShareGroupDescribe (key 77): KIP-932 share groups with their epochs, assignor and each member's
assignment (a share group has no separate target assignment per member on the wire).

Valid version 1 only, flexible.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT16, INT32, NULL, STRING, UUID, Array, Struct, f, message

REQUEST = message(
    "ShareGroupDescribeRequest",
    ApiKey.SHARE_GROUP_DESCRIBE,
    "1",
    "0+",
    [
        f("group_ids", Array(STRING)),
        f("include_authorized_operations", BOOL),
    ],
)

_TOPIC_PARTITIONS = Struct(
    [
        f("topic_id", UUID),
        f("topic_name", STRING),
        f("partitions", Array(INT32)),
    ]
)
_ASSIGNMENT = Struct([f("topic_partitions", Array(_TOPIC_PARTITIONS))])
_MEMBER = Struct(
    [
        f("member_id", STRING),
        f("rack_id", STRING, nullable="0+", default=NULL),
        f("member_epoch", INT32),
        f("client_id", STRING),
        f("client_host", STRING),
        f("subscribed_topic_names", Array(STRING)),
        f("assignment", _ASSIGNMENT),
    ]
)
_DESCRIBED_GROUP = Struct(
    [
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=NULL),
        f("group_id", STRING),
        f("group_state", STRING),
        f("group_epoch", INT32),
        f("assignment_epoch", INT32),
        f("assignor_name", STRING),
        f("members", Array(_MEMBER)),
        f("authorized_operations", INT32, default=-2147483648),
    ]
)

RESPONSE = message(
    "ShareGroupDescribeResponse",
    ApiKey.SHARE_GROUP_DESCRIBE,
    "1",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("groups", Array(_DESCRIBED_GROUP)),
    ],
)
