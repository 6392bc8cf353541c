"""DescribeGroups (key 15): state, protocol and members of classic groups.

Valid versions 0-6; version 5 is the first flexible version.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, BYTES, INT16, INT32, NULL, STRING, Array, Struct, f, message

REQUEST = message(
    "DescribeGroupsRequest",
    ApiKey.DESCRIBE_GROUPS,
    "0-6",
    "5+",
    [
        f("groups", Array(STRING)),
        f("include_authorized_operations", BOOL, "3+"),
    ],
)

_DESCRIBED_GROUP_MEMBER = Struct(
    [
        f("member_id", STRING),
        f("group_instance_id", STRING, "4+", nullable="4+", default=NULL),
        f("client_id", STRING),
        f("client_host", STRING),
        f("member_metadata", BYTES),
        f("member_assignment", BYTES),
    ]
)
_DESCRIBED_GROUP = Struct(
    [
        f("error_code", INT16),
        f("error_message", STRING, "6+", nullable="6+", default=NULL),
        f("group_id", STRING),
        f("group_state", STRING),
        f("protocol_type", STRING),
        f("protocol_data", STRING),
        f("members", Array(_DESCRIBED_GROUP_MEMBER)),
        f("authorized_operations", INT32, "3+", default=-2147483648),
    ]
)

RESPONSE = message(
    "DescribeGroupsResponse",
    ApiKey.DESCRIBE_GROUPS,
    "0-6",
    "5+",
    [
        f("throttle_time_ms", INT32, "1+"),
        f("groups", Array(_DESCRIBED_GROUP)),
    ],
)
