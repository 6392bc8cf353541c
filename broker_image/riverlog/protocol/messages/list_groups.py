"""ListGroups (key 16): the groups a coordinator knows, optionally filtered by state and type.

Valid versions 0-5; version 3 is the first flexible version.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, STRING, Array, Struct, f, message

REQUEST = message(
    "ListGroupsRequest",
    ApiKey.LIST_GROUPS,
    "0-5",
    "3+",
    [
        f("states_filter", Array(STRING), "4+"),
        f("types_filter", Array(STRING), "5+"),
    ],
)

_LISTED_GROUP = Struct(
    [
        f("group_id", STRING),
        f("protocol_type", STRING),
        f("group_state", STRING, "4+"),
        f("group_type", STRING, "5+"),
    ]
)

RESPONSE = message(
    "ListGroupsResponse",
    ApiKey.LIST_GROUPS,
    "0-5",
    "3+",
    [
        f("throttle_time_ms", INT32, "1+"),
        f("error_code", INT16),
        f("groups", Array(_LISTED_GROUP)),
    ],
)
