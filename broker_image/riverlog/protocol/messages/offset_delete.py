"""OffsetDelete (key 47): delete committed offsets of a group for some partitions.

Valid version 0 only; no flexible versions.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, STRING, Array, Struct, f, message

_OFFSET_DELETE_REQUEST_PARTITION = Struct([f("partition_index", INT32)])
_OFFSET_DELETE_REQUEST_TOPIC = Struct(
    [
        f("name", STRING),
        f("partitions", Array(_OFFSET_DELETE_REQUEST_PARTITION)),
    ]
)

REQUEST = message(
    "OffsetDeleteRequest",
    ApiKey.OFFSET_DELETE,
    "0",
    "none",
    [
        f("group_id", STRING),
        f("topics", Array(_OFFSET_DELETE_REQUEST_TOPIC)),
    ],
)

_OFFSET_DELETE_RESPONSE_PARTITION = Struct(
    [
        f("partition_index", INT32),
        f("error_code", INT16),
    ]
)
_OFFSET_DELETE_RESPONSE_TOPIC = Struct(
    [
        f("name", STRING),
        f("partitions", Array(_OFFSET_DELETE_RESPONSE_PARTITION)),
    ]
)

RESPONSE = message(
    "OffsetDeleteResponse",
    ApiKey.OFFSET_DELETE,
    "0",
    "none",
    [
        f("error_code", INT16),
        f("throttle_time_ms", INT32),
        f("topics", Array(_OFFSET_DELETE_RESPONSE_TOPIC)),
    ],
)
