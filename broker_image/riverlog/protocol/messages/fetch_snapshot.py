"""FetchSnapshot (key 59): a KRaft replica downloads the leader's snapshot in chunks (KIP-630).

Kafka 4.x: valid versions 0-1, flexible in all. Version 1 adds the fetcher's tagged directory id
and the response's tagged node endpoints (KIP-853).
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, INT64, NULL, RECORDS, STRING, UINT16, UUID, Array, Struct, f, message

_SNAPSHOT_ID_REQUEST = Struct(
    [
        f("end_offset", INT64),
        f("epoch", INT32),
    ]
)
_PARTITION_REQUEST = Struct(
    [
        f("partition", INT32),
        f("current_leader_epoch", INT32),
        f("snapshot_id", _SNAPSHOT_ID_REQUEST),
        f("position", INT64),  # byte offset in the snapshot to read from
        f("replica_directory_id", UUID, "1+", tag=0, tagged="1+"),
    ]
)
_TOPIC_REQUEST = Struct(
    [
        f("name", STRING),
        f("partitions", Array(_PARTITION_REQUEST)),
    ]
)

REQUEST = message(
    "FetchSnapshotRequest",
    ApiKey.FETCH_SNAPSHOT,
    "0-1",
    "0+",
    [
        f("cluster_id", STRING, nullable="0+", tag=0, tagged="0+", default=NULL),
        f("replica_id", INT32, default=-1),
        f("max_bytes", INT32, default=0x7FFF_FFFF),
        f("topics", Array(_TOPIC_REQUEST)),
    ],
)

_SNAPSHOT_ID_RESPONSE = Struct(
    [
        f("end_offset", INT64),
        f("epoch", INT32),
    ]
)
_LEADER_ID_AND_EPOCH = Struct(
    [
        f("leader_id", INT32),
        f("leader_epoch", INT32),
    ]
)
_PARTITION_RESPONSE = Struct(
    [
        f("index", INT32),
        f("error_code", INT16),
        f("snapshot_id", _SNAPSHOT_ID_RESPONSE),
        f("current_leader", _LEADER_ID_AND_EPOCH, tag=0, tagged="0+"),
        f("size", INT64),  # the snapshot's total size in bytes
        f("position", INT64),  # where ``unaligned_records`` starts in the snapshot
        f("unaligned_records", RECORDS),  # a chunk: need not end on a batch boundary
    ]
)
_TOPIC_RESPONSE = Struct(
    [
        f("name", STRING),
        f("partitions", Array(_PARTITION_RESPONSE)),
    ]
)
_NODE_ENDPOINT = Struct(
    [
        f("node_id", INT32, "1+"),
        f("host", STRING, "1+"),
        f("port", UINT16, "1+"),
    ]
)

RESPONSE = message(
    "FetchSnapshotResponse",
    ApiKey.FETCH_SNAPSHOT,
    "0-1",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("topics", Array(_TOPIC_RESPONSE)),
        f("node_endpoints", Array(_NODE_ENDPOINT), "1+", tag=0, tagged="1+"),
    ],
)
