"""JoinGroup (key 11): a member joins a classic consumer group (or rejoins for a rebalance).

Valid versions 0-9 (Apache Kafka removed 0-1 in 4.0 and restored them in 4.0.1/4.1, KAFKA-19444);
version 6 is the first flexible version.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, BYTES, INT16, INT32, NULL, STRING, Array, Struct, f, message

_JOIN_GROUP_REQUEST_PROTOCOL = Struct(
    [
        f("name", STRING),
        f("metadata", BYTES),
    ]
)

REQUEST = message(
    "JoinGroupRequest",
    ApiKey.JOIN_GROUP,
    "0-9",
    "6+",
    [
        f("group_id", STRING),
        f("session_timeout_ms", INT32),
        # Absent in version 0: the session timeout stands in for it.
        f("rebalance_timeout_ms", INT32, "1+", default=-1),
        f("member_id", STRING),
        f("group_instance_id", STRING, "5+", nullable="5+", default=NULL),
        f("protocol_type", STRING),
        f("protocols", Array(_JOIN_GROUP_REQUEST_PROTOCOL)),
        f("reason", STRING, "8+", nullable="8+", default=NULL),
    ],
)

_JOIN_GROUP_RESPONSE_MEMBER = Struct(
    [
        f("member_id", STRING),
        f("group_instance_id", STRING, "5+", nullable="5+", default=NULL),
        f("metadata", BYTES),
    ]
)

RESPONSE = message(
    "JoinGroupResponse",
    ApiKey.JOIN_GROUP,
    "0-9",
    "6+",
    [
        f("throttle_time_ms", INT32, "2+"),
        f("error_code", INT16),
        f("generation_id", INT32, default=-1),
        f("protocol_type", STRING, "7+", nullable="7+", default=NULL),
        f("protocol_name", STRING, nullable="7+"),
        f("leader", STRING),
        f("skip_assignment", BOOL, "9+"),
        f("member_id", STRING),
        f("members", Array(_JOIN_GROUP_RESPONSE_MEMBER)),
    ],
)
