"""DescribeProducers (key 61): the active (idempotent/transactional) producers of partitions.

Kafka 4.x: valid version 0 only, flexible.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, INT64, NULL, STRING, Array, Struct, f, message

_TOPIC_REQUEST = Struct(
    [
        f("name", STRING),
        f("partition_indexes", Array(INT32)),
    ]
)

REQUEST = message(
    "DescribeProducersRequest",
    ApiKey.DESCRIBE_PRODUCERS,
    "0",
    "0+",
    [
        f("topics", Array(_TOPIC_REQUEST)),
    ],
)

_PRODUCER_STATE = Struct(
    [
        f("producer_id", INT64),
        f("producer_epoch", INT32),
        f("last_sequence", INT32, default=-1),
        f("last_timestamp", INT64, default=-1),
        f("coordinator_epoch", INT32),
        f("current_txn_start_offset", INT64, default=-1),
    ]
)
_PARTITION_RESPONSE = Struct(
    [
        f("partition_index", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=NULL),
        f("active_producers", Array(_PRODUCER_STATE)),
    ]
)
_TOPIC_RESPONSE = Struct(
    [
        f("name", STRING),
        f("partitions", Array(_PARTITION_RESPONSE)),
    ]
)

RESPONSE = message(
    "DescribeProducersResponse",
    ApiKey.DESCRIBE_PRODUCERS,
    "0",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("topics", Array(_TOPIC_RESPONSE)),
    ],
)
