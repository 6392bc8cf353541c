"""DeleteShareGroupOffsets (key 92): an admin removes an empty share group's state for whole
topics (the group starts over on them per ``share.auto.offset.reset``). Version 0, flexible.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, NULL, STRING, UUID, Array, Struct, f, message

REQUEST = message(
    "DeleteShareGroupOffsetsRequest",
    ApiKey.DELETE_SHARE_GROUP_OFFSETS,
    "0",
    "0+",
    [
        f("group_id", STRING),
        f("topics", Array(Struct([f("topic_name", STRING)]))),
    ],
)

_TOPIC = Struct(
    [
        f("topic_name", STRING),
        f("topic_id", UUID),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=NULL),
    ]
)

RESPONSE = message(
    "DeleteShareGroupOffsetsResponse",
    ApiKey.DELETE_SHARE_GROUP_OFFSETS,
    "0",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=NULL),
        f("responses", Array(_TOPIC)),
    ],
)
