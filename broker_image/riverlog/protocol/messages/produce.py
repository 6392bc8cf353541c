"""Produce (key 0): append record batches to partition logs.

Kafka 4.x: valid versions 3-13 (versions 0-2 were removed in Kafka 4.0, KIP-896; Kafka still lists
version 0 as the minimum in its ApiVersions answer because of a librdkafka bug, KAFKA-18659, but
rejects 0-2), flexible from 9. Version 13 names topics by id instead of by name (KIP-516).
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, INT64, NULL, RECORDS, STRING, UUID, Array, Struct, f, message

_PARTITION_PRODUCE_DATA = Struct(
    [
        f("index", INT32),
        f("records", RECORDS, nullable="0+"),
    ]
)
_TOPIC_PRODUCE_DATA = Struct(
    [
        f("name", STRING, "0-12"),
        f("topic_id", UUID, "13+"),
        f("partition_data", Array(_PARTITION_PRODUCE_DATA)),
    ]
)

REQUEST = message(
    "ProduceRequest",
    ApiKey.PRODUCE,
    "3-13",
    "9+",
    [
        f("transactional_id", STRING, "3+", nullable="3+", default=NULL),
        f("acks", INT16),
        f("timeout_ms", INT32),
        f("topic_data", Array(_TOPIC_PRODUCE_DATA)),
    ],
)

_BATCH_INDEX_AND_ERROR_MESSAGE = Struct(
    [
        f("batch_index", INT32, "8+"),
        f("batch_index_error_message", STRING, "8+", nullable="8+", default=NULL),
    ]
)
_LEADER_ID_AND_EPOCH = Struct(
    [
        f("leader_id", INT32, "10+", default=-1),
        f("leader_epoch", INT32, "10+", default=-1),
    ]
)
_PARTITION_PRODUCE_RESPONSE = Struct(
    [
        f("index", INT32),
        f("error_code", INT16),
        f("base_offset", INT64),
        f("log_append_time_ms", INT64, "2+", default=-1),
        f("log_start_offset", INT64, "5+", default=-1),
        f("record_errors", Array(_BATCH_INDEX_AND_ERROR_MESSAGE), "8+"),
        f("error_message", STRING, "8+", nullable="8+", default=NULL),
        f("current_leader", _LEADER_ID_AND_EPOCH, "10+", tag=0, tagged="10+"),
    ]
)
_TOPIC_PRODUCE_RESPONSE = Struct(
    [
        f("name", STRING, "0-12"),
        f("topic_id", UUID, "13+"),
        f("partition_responses", Array(_PARTITION_PRODUCE_RESPONSE)),
    ]
)
_NODE_ENDPOINT = Struct(
    [
        f("node_id", INT32, "10+"),
        f("host", STRING, "10+"),
        f("port", INT32, "10+"),
        f("rack", STRING, "10+", nullable="10+", default=NULL),
    ]
)

RESPONSE = message(
    "ProduceResponse",
    ApiKey.PRODUCE,
    "3-13",
    "9+",
    [
        f("responses", Array(_TOPIC_PRODUCE_RESPONSE)),
        f("throttle_time_ms", INT32, "1+", default=0),
        f("node_endpoints", Array(_NODE_ENDPOINT), "10+", tag=0, tagged="10+"),
    ],
)
