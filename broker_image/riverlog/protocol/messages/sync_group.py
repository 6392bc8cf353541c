"""SyncGroup (key 14): after a JoinGroup round the leader sends the assignments and every member
receives its own.

Valid versions 0-5; version 4 is the first flexible version.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BYTES, INT16, INT32, NULL, STRING, Array, Struct, f, message

_SYNC_GROUP_REQUEST_ASSIGNMENT = Struct(
    [
        f("member_id", STRING),
        f("assignment", BYTES),
    ]
)

REQUEST = message(
    "SyncGroupRequest",
    ApiKey.SYNC_GROUP,
    "0-5",
    "4+",
    [
        f("group_id", STRING),
        f("generation_id", INT32),
        f("member_id", STRING),
        f("group_instance_id", STRING, "3+", nullable="3+", default=NULL),
        f("protocol_type", STRING, "5+", nullable="5+", default=NULL),
        f("protocol_name", STRING, "5+", nullable="5+", default=NULL),
        f("assignments", Array(_SYNC_GROUP_REQUEST_ASSIGNMENT)),
    ],
)

RESPONSE = message(
    "SyncGroupResponse",
    ApiKey.SYNC_GROUP,
    "0-5",
    "4+",
    [
        f("throttle_time_ms", INT32, "1+"),
        f("error_code", INT16),
        f("protocol_type", STRING, "5+", nullable="5+", default=NULL),
        f("protocol_name", STRING, "5+", nullable="5+", default=NULL),
        f("assignment", BYTES),
    ],
)
