"""OffsetFetch (key 9): committed offsets of a group. Versions 1-7 ask about one group
(``group_id``, ``topics``); version 8+ about several (``groups``), and the response answers in
the same shape (``topics`` and ``error_code`` at top level, or ``groups``).

Valid versions 1-10 (Kafka 4.0 removed version 0, KIP-896). Version 6 is the first flexible
version; version 10 names topics by id instead of by name.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT16, INT32, INT64, NULL, STRING, UUID, Array, Struct, f, message

_OFFSET_FETCH_REQUEST_TOPIC = Struct(
    [
        f("name", STRING, "0-7"),
        f("partition_indexes", Array(INT32), "0-7"),
    ]
)
_OFFSET_FETCH_REQUEST_TOPICS = Struct(
    [
        f("name", STRING, "8-9"),
        f("topic_id", UUID, "10+"),
        f("partition_indexes", Array(INT32), "8+"),
    ]
)
_OFFSET_FETCH_REQUEST_GROUP = Struct(
    [
        f("group_id", STRING, "8+"),
        f("member_id", STRING, "9+", nullable="9+", default=NULL),
        f("member_epoch", INT32, "9+", default=-1),
        # null means every topic the group has offsets for
        f("topics", Array(_OFFSET_FETCH_REQUEST_TOPICS), "8+", nullable="8+"),
    ]
)

REQUEST = message(
    "OffsetFetchRequest",
    ApiKey.OFFSET_FETCH,
    "1-10",
    "6+",
    [
        f("group_id", STRING, "0-7"),
        # null (version 2+) means every topic the group has offsets for
        f("topics", Array(_OFFSET_FETCH_REQUEST_TOPIC), "0-7", nullable="2-7"),
        f("groups", Array(_OFFSET_FETCH_REQUEST_GROUP), "8+"),
        f("require_stable", BOOL, "7+"),
    ],
)

_OFFSET_FETCH_RESPONSE_PARTITION = Struct(
    [
        f("partition_index", INT32, "0-7"),
        f("committed_offset", INT64, "0-7"),
        f("committed_leader_epoch", INT32, "5-7", default=-1),
        f("metadata", STRING, "0-7", nullable="0-7"),
        f("error_code", INT16, "0-7"),
    ]
)
_OFFSET_FETCH_RESPONSE_TOPIC = Struct(
    [
        f("name", STRING, "0-7"),
        f("partitions", Array(_OFFSET_FETCH_RESPONSE_PARTITION), "0-7"),
    ]
)
_OFFSET_FETCH_RESPONSE_PARTITIONS = Struct(
    [
        f("partition_index", INT32, "8+"),
        f("committed_offset", INT64, "8+"),
        f("committed_leader_epoch", INT32, "8+", default=-1),
        f("metadata", STRING, "8+", nullable="8+"),
        f("error_code", INT16, "8+"),
    ]
)
_OFFSET_FETCH_RESPONSE_TOPICS = Struct(
    [
        f("name", STRING, "8-9"),
        f("topic_id", UUID, "10+"),
        f("partitions", Array(_OFFSET_FETCH_RESPONSE_PARTITIONS), "8+"),
    ]
)
_OFFSET_FETCH_RESPONSE_GROUP = Struct(
    [
        f("group_id", STRING, "8+"),
        f("topics", Array(_OFFSET_FETCH_RESPONSE_TOPICS), "8+"),
        f("error_code", INT16, "8+"),
    ]
)

RESPONSE = message(
    "OffsetFetchResponse",
    ApiKey.OFFSET_FETCH,
    "1-10",
    "6+",
    [
        f("throttle_time_ms", INT32, "3+"),
        f("topics", Array(_OFFSET_FETCH_RESPONSE_TOPIC), "0-7"),
        f("error_code", INT16, "2-7"),
        f("groups", Array(_OFFSET_FETCH_RESPONSE_GROUP), "8+"),
    ],
)
