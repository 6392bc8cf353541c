"""DescribeQuorum (key 55): the KRaft quorum's leader, high watermark, voters and observers with
their replication progress (what ``kafka-metadata-quorum describe`` shows).

Kafka 4.x: valid versions 0-2, flexible in all. Version 1 adds each replica's last fetch and
last caught-up times (KIP-836), version 2 error messages, replica directory ids and the voters'
endpoints (``nodes``, KIP-853).
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, INT64, STRING, UINT16, UUID, Array, Struct, f, message

_PARTITION_REQUEST = Struct([f("partition_index", INT32)])
_TOPIC_REQUEST = Struct(
    [
        f("topic_name", STRING),
        f("partitions", Array(_PARTITION_REQUEST)),
    ]
)

REQUEST = message(
    "DescribeQuorumRequest",
    ApiKey.DESCRIBE_QUORUM,
    "0-2",
    "0+",
    [f("topics", Array(_TOPIC_REQUEST))],
)

_REPLICA_STATE = Struct(
    [
        f("replica_id", INT32),
        f("replica_directory_id", UUID, "2+"),
        f("log_end_offset", INT64),
        # -1: unknown (and always -1 for the leader's own last fetch).
        f("last_fetch_timestamp", INT64, "1+", default=-1),
        f("last_caught_up_timestamp", INT64, "1+", default=-1),
    ]
)
_PARTITION_RESPONSE = Struct(
    [
        f("partition_index", INT32),
        f("error_code", INT16),
        # Nullable without a null default in the spec: absent (versions 0-1) reads as "".
        f("error_message", STRING, "2+", nullable="2+"),
        f("leader_id", INT32),
        f("leader_epoch", INT32),
        f("high_watermark", INT64),
        f("current_voters", Array(_REPLICA_STATE)),
        f("observers", Array(_REPLICA_STATE)),
    ]
)
_TOPIC_RESPONSE = Struct(
    [
        f("topic_name", STRING),
        f("partitions", Array(_PARTITION_RESPONSE)),
    ]
)
_LISTENER = Struct(
    [
        f("name", STRING, "2+"),
        f("host", STRING, "2+"),
        f("port", UINT16, "2+"),
    ]
)
_NODE = Struct(
    [
        f("node_id", INT32, "2+"),
        f("listeners", Array(_LISTENER), "2+"),
    ]
)

RESPONSE = message(
    "DescribeQuorumResponse",
    ApiKey.DESCRIBE_QUORUM,
    "0-2",
    "0+",
    [
        f("error_code", INT16),
        f("error_message", STRING, "2+", nullable="2+"),
        f("topics", Array(_TOPIC_RESPONSE)),
        f("nodes", Array(_NODE), "2+"),
    ],
)
