"""ListOffsets (key 2): offsets by timestamp (earliest -2, latest -1, max timestamp -3, ...).

Kafka 4.x: valid versions 1-11 (version 0 was removed in Kafka 4.0, KIP-896), flexible from 6.
The version-0-only fields (``max_num_offsets``, ``old_style_offsets``) are kept, as in the spec,
though no valid version carries them.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT8, INT16, INT32, INT64, STRING, Array, Struct, f, message

_LIST_OFFSETS_PARTITION = Struct(
    [
        f("partition_index", INT32),
        f("current_leader_epoch", INT32, "4+", default=-1),
        f("timestamp", INT64),
        f("max_num_offsets", INT32, "0", default=1),
    ]
)
_LIST_OFFSETS_TOPIC = Struct(
    [
        f("name", STRING),
        f("partitions", Array(_LIST_OFFSETS_PARTITION)),
    ]
)

REQUEST = message(
    "ListOffsetsRequest",
    ApiKey.LIST_OFFSETS,
    "1-11",
    "6+",
    [
        f("replica_id", INT32),
        f("isolation_level", INT8, "2+"),
        f("topics", Array(_LIST_OFFSETS_TOPIC)),
        f("timeout_ms", INT32, "10+"),
    ],
)

_LIST_OFFSETS_PARTITION_RESPONSE = Struct(
    [
        f("partition_index", INT32),
        f("error_code", INT16),
        f("old_style_offsets", Array(INT64), "0"),
        f("timestamp", INT64, "1+", default=-1),
        f("offset", INT64, "1+", default=-1),
        f("leader_epoch", INT32, "4+", default=-1),
    ]
)
_LIST_OFFSETS_TOPIC_RESPONSE = Struct(
    [
        f("name", STRING),
        f("partitions", Array(_LIST_OFFSETS_PARTITION_RESPONSE)),
    ]
)

RESPONSE = message(
    "ListOffsetsResponse",
    ApiKey.LIST_OFFSETS,
    "1-11",
    "6+",
    [
        f("throttle_time_ms", INT32, "2+"),
        f("topics", Array(_LIST_OFFSETS_TOPIC_RESPONSE)),
    ],
)
