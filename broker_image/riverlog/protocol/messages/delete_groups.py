"""DeleteGroups (key 42): delete empty groups and their committed offsets.

Valid versions 0-2; version 2 is the first flexible version.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, STRING, Array, Struct, f, message

REQUEST = message(
    "DeleteGroupsRequest",
    ApiKey.DELETE_GROUPS,
    "0-2",
    "2+",
    [
        f("groups_names", Array(STRING)),
    ],
)

_DELETABLE_GROUP_RESULT = Struct(
    [
        f("group_id", STRING),
        f("error_code", INT16),
    ]
)

RESPONSE = message(
    "DeleteGroupsResponse",
    ApiKey.DELETE_GROUPS,
    "0-2",
    "2+",
    [
        f("throttle_time_ms", INT32),
        f("results", Array(_DELETABLE_GROUP_RESULT)),
    ],
)
