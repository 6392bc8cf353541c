"""Fetch (key 1): read record batches from partition logs, for consumers and follower replicas.

Kafka 4.x: valid versions 4-18 (versions 0-3 were removed in Kafka 4.0, KIP-896), flexible from 12.
Version 7 adds fetch sessions (KIP-227), 12 ``LastFetchedEpoch`` and the tagged diverging epoch,
current leader and snapshot id, 13 topic ids instead of names (KIP-516), 15 ``ReplicaState``
(KIP-903), 16 ``NodeEndpoints`` (KIP-951), 17 the follower's directory id (KIP-853), 18 the
follower's high watermark (KIP-1166).
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT8, INT16, INT32, INT64, NULL, RECORDS, STRING, UUID, Array, Struct, f, message

_REPLICA_STATE = Struct(
    [
        f("replica_id", INT32, "15+", default=-1),
        f("replica_epoch", INT64, "15+", default=-1),
    ]
)
_FETCH_PARTITION = Struct(
    [
        f("partition", INT32),
        f("current_leader_epoch", INT32, "9+", default=-1),
        f("fetch_offset", INT64),
        f("last_fetched_epoch", INT32, "12+", default=-1),
        f("log_start_offset", INT64, "5+", default=-1),
        f("partition_max_bytes", INT32),
        f("replica_directory_id", UUID, "17+", tag=0, tagged="17+"),
        f("high_watermark", INT64, "18+", tag=1, tagged="18+", default=0x7FFF_FFFF_FFFF_FFFF),
    ]
)
_FETCH_TOPIC = Struct(
    [
        f("topic", STRING, "0-12"),
        f("topic_id", UUID, "13+"),
        f("partitions", Array(_FETCH_PARTITION)),
    ]
)
_FORGOTTEN_TOPIC = Struct(
    [
        f("topic", STRING, "7-12"),
        f("topic_id", UUID, "13+"),
        f("partitions", Array(INT32), "7+"),
    ]
)

REQUEST = message(
    "FetchRequest",
    ApiKey.FETCH,
    "4-18",
    "12+",
    [
        f("cluster_id", STRING, "12+", nullable="12+", tag=0, tagged="12+", default=NULL),
        f("replica_id", INT32, "0-14", default=-1),
        f("replica_state", _REPLICA_STATE, "15+", tag=1, tagged="15+"),
        f("max_wait_ms", INT32),
        f("min_bytes", INT32),
        f("max_bytes", INT32, "3+", default=0x7FFF_FFFF),
        f("isolation_level", INT8, "4+", default=0),
        f("session_id", INT32, "7+", default=0),
        f("session_epoch", INT32, "7+", default=-1),
        f("topics", Array(_FETCH_TOPIC)),
        f("forgotten_topics_data", Array(_FORGOTTEN_TOPIC), "7+"),
        f("rack_id", STRING, "11+", default=""),
    ],
)

_EPOCH_END_OFFSET = Struct(
    [
        f("epoch", INT32, "12+", default=-1),
        f("end_offset", INT64, "12+", default=-1),
    ]
)
_LEADER_ID_AND_EPOCH = Struct(
    [
        f("leader_id", INT32, "12+", default=-1),
        f("leader_epoch", INT32, "12+", default=-1),
    ]
)
_SNAPSHOT_ID = Struct(
    [
        f("end_offset", INT64, "0+", default=-1),
        f("epoch", INT32, "0+", default=-1),
    ]
)
_ABORTED_TRANSACTION = Struct(
    [
        f("producer_id", INT64, "4+"),
        f("first_offset", INT64, "4+"),
    ]
)
_PARTITION_DATA = Struct(
    [
        f("partition_index", INT32),
        f("error_code", INT16),
        f("high_watermark", INT64),
        f("last_stable_offset", INT64, "4+", default=-1),
        f("log_start_offset", INT64, "5+", default=-1),
        f("diverging_epoch", _EPOCH_END_OFFSET, "12+", tag=0, tagged="12+"),
        f("current_leader", _LEADER_ID_AND_EPOCH, "12+", tag=1, tagged="12+"),
        f("snapshot_id", _SNAPSHOT_ID, "12+", tag=2, tagged="12+"),
        f("aborted_transactions", Array(_ABORTED_TRANSACTION), "4+", nullable="4+"),
        f("preferred_read_replica", INT32, "11+", default=-1),
        f("records", RECORDS, nullable="0+"),
    ]
)
_FETCHABLE_TOPIC_RESPONSE = Struct(
    [
        f("topic", STRING, "0-12"),
        f("topic_id", UUID, "13+"),
        f("partitions", Array(_PARTITION_DATA)),
    ]
)
_NODE_ENDPOINT = Struct(
    [
        f("node_id", INT32, "16+"),
        f("host", STRING, "16+"),
        f("port", INT32, "16+"),
        f("rack", STRING, "16+", nullable="16+", default=NULL),
    ]
)

RESPONSE = message(
    "FetchResponse",
    ApiKey.FETCH,
    "4-18",
    "12+",
    [
        f("throttle_time_ms", INT32, "1+"),
        f("error_code", INT16, "7+"),
        f("session_id", INT32, "7+", default=0),
        f("responses", Array(_FETCHABLE_TOPIC_RESPONSE)),
        f("node_endpoints", Array(_NODE_ENDPOINT), "16+", tag=0, tagged="16+"),
    ],
)
