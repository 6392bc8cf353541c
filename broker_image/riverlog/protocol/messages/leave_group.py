"""LeaveGroup (key 13): members leave a classic group. Versions 0-2 carry one ``member_id``;
version 3+ a batch of ``members`` (member id and group instance id).

Valid versions 0-5; version 4 is the first flexible version.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, NULL, STRING, Array, Struct, f, message

_MEMBER_IDENTITY = Struct(
    [
        f("member_id", STRING, "3+"),
        f("group_instance_id", STRING, "3+", nullable="3+", default=NULL),
        f("reason", STRING, "5+", nullable="5+", default=NULL),
    ]
)

REQUEST = message(
    "LeaveGroupRequest",
    ApiKey.LEAVE_GROUP,
    "0-5",
    "4+",
    [
        f("group_id", STRING),
        f("member_id", STRING, "0-2"),
        f("members", Array(_MEMBER_IDENTITY), "3+"),
    ],
)

_MEMBER_RESPONSE = Struct(
    [
        f("member_id", STRING, "3+"),
        f("group_instance_id", STRING, "3+", nullable="3+"),
        f("error_code", INT16, "3+"),
    ]
)

RESPONSE = message(
    "LeaveGroupResponse",
    ApiKey.LEAVE_GROUP,
    "0-5",
    "4+",
    [
        f("throttle_time_ms", INT32, "1+"),
        f("error_code", INT16),
        f("members", Array(_MEMBER_RESPONSE), "3+"),
    ],
)
