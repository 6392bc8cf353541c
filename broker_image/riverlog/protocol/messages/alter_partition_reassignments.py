"""AlterPartitionReassignments (key 45): start or cancel (``replicas`` null) partition
reassignments.

Valid versions 0-1; every version is flexible.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT16, INT32, NULL, STRING, Array, Struct, f, message

_REASSIGNABLE_PARTITION = Struct(
    [
        f("partition_index", INT32),
        # null cancels a pending reassignment
        f("replicas", Array(INT32), nullable="0+", default=NULL),
    ]
)
_REASSIGNABLE_TOPIC = Struct(
    [
        f("name", STRING),
        f("partitions", Array(_REASSIGNABLE_PARTITION)),
    ]
)

REQUEST = message(
    "AlterPartitionReassignmentsRequest",
    ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    "0-1",
    "0+",
    [
        f("timeout_ms", INT32, default=60000),
        f("allow_replication_factor_change", BOOL, "1+", default=True),
        f("topics", Array(_REASSIGNABLE_TOPIC)),
    ],
)

_REASSIGNABLE_PARTITION_RESPONSE = Struct(
    [
        f("partition_index", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
    ]
)
_REASSIGNABLE_TOPIC_RESPONSE = Struct(
    [
        f("name", STRING),
        f("partitions", Array(_REASSIGNABLE_PARTITION_RESPONSE)),
    ]
)

RESPONSE = message(
    "AlterPartitionReassignmentsResponse",
    ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    "0-1",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("allow_replication_factor_change", BOOL, "1+", default=True),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
        f("responses", Array(_REASSIGNABLE_TOPIC_RESPONSE)),
    ],
)
