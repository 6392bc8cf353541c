"""ElectLeaders (key 43): elect the preferred (election type 0) or an unclean (1) leader for
partitions; ``topic_partitions`` null means every partition.

Valid versions 0-2; version 2 is the first flexible version.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT8, INT16, INT32, STRING, Array, Struct, f, message

_TOPIC_PARTITIONS = Struct(
    [
        f("topic", STRING),
        f("partitions", Array(INT32)),
    ]
)

REQUEST = message(
    "ElectLeadersRequest",
    ApiKey.ELECT_LEADERS,
    "0-2",
    "2+",
    [
        f("election_type", INT8, "1+"),
        f("topic_partitions", Array(_TOPIC_PARTITIONS), nullable="0+"),
        f("timeout_ms", INT32, default=60000),
    ],
)

_PARTITION_RESULT = Struct(
    [
        f("partition_id", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
    ]
)
_REPLICA_ELECTION_RESULT = Struct(
    [
        f("topic", STRING),
        f("partition_result", Array(_PARTITION_RESULT)),
    ]
)

RESPONSE = message(
    "ElectLeadersResponse",
    ApiKey.ELECT_LEADERS,
    "0-2",
    "2+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16, "1+"),
        f("replica_election_results", Array(_REPLICA_ELECTION_RESULT)),
    ],
)
