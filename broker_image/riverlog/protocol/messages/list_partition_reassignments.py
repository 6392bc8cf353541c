"""ListPartitionReassignments (key 46): ongoing partition reassignments; ``topics`` null means
all of them.

Valid version 0 only, which is flexible.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, NULL, STRING, Array, Struct, f, message

_LIST_PARTITION_REASSIGNMENTS_TOPICS = Struct(
    [
        f("name", STRING),
        f("partition_indexes", Array(INT32)),
    ]
)

REQUEST = message(
    "ListPartitionReassignmentsRequest",
    ApiKey.LIST_PARTITION_REASSIGNMENTS,
    "0",
    "0+",
    [
        f("timeout_ms", INT32, default=60000),
        f("topics", Array(_LIST_PARTITION_REASSIGNMENTS_TOPICS), nullable="0+", default=NULL),
    ],
)

_ONGOING_PARTITION_REASSIGNMENT = Struct(
    [
        f("partition_index", INT32),
        f("replicas", Array(INT32)),
        f("adding_replicas", Array(INT32)),
        f("removing_replicas", Array(INT32)),
    ]
)
_ONGOING_TOPIC_REASSIGNMENT = Struct(
    [
        f("name", STRING),
        f("partitions", Array(_ONGOING_PARTITION_REASSIGNMENT)),
    ]
)

RESPONSE = message(
    "ListPartitionReassignmentsResponse",
    ApiKey.LIST_PARTITION_REASSIGNMENTS,
    "0",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
        f("topics", Array(_ONGOING_TOPIC_REASSIGNMENT)),
    ],
)
