"""BeginQuorumEpoch (key 53): a newly elected KRaft leader tells the voters (KIP-595).

Kafka 4.x: valid versions 0-1, flexible from 1. Version 1 adds the voter key (``voter_id``,
``voter_directory_id``), the leader's endpoints and the response's tagged node endpoints (KIP-853).
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, NULL, STRING, UINT16, UUID, Array, Struct, f, message

_PARTITION_REQUEST = Struct(
    [
        f("partition_index", INT32),
        f("voter_directory_id", UUID, "1+"),
        f("leader_id", INT32),
        f("leader_epoch", INT32),
    ]
)
_TOPIC_REQUEST = Struct(
    [
        f("topic_name", STRING),
        f("partitions", Array(_PARTITION_REQUEST)),
    ]
)
# The leader's listeners, by listener name.
_LEADER_ENDPOINT = Struct(
    [
        f("name", STRING, "1+"),
        f("host", STRING, "1+"),
        f("port", UINT16, "1+"),
    ]
)

REQUEST = message(
    "BeginQuorumEpochRequest",
    ApiKey.BEGIN_QUORUM_EPOCH,
    "0-1",
    "1+",
    [
        f("cluster_id", STRING, nullable="0+", default=NULL),
        f("voter_id", INT32, "1+", default=-1),
        f("topics", Array(_TOPIC_REQUEST)),
        f("leader_endpoints", Array(_LEADER_ENDPOINT), "1+"),
    ],
)

_PARTITION_RESPONSE = Struct(
    [
        f("partition_index", INT32),
        f("error_code", INT16),
        f("leader_id", INT32),
        f("leader_epoch", INT32),
    ]
)
_TOPIC_RESPONSE = Struct(
    [
        f("topic_name", STRING),
        f("partitions", Array(_PARTITION_RESPONSE)),
    ]
)

# Where to reach the leader the response names (KIP-853).
_NODE_ENDPOINT = Struct(
    [
        f("node_id", INT32, "1+"),
        f("host", STRING, "1+"),
        f("port", UINT16, "1+"),
    ]
)

RESPONSE = message(
    "BeginQuorumEpochResponse",
    ApiKey.BEGIN_QUORUM_EPOCH,
    "0-1",
    "1+",
    [
        f("error_code", INT16),
        f("topics", Array(_TOPIC_RESPONSE)),
        f("node_endpoints", Array(_NODE_ENDPOINT), "1+", tag=0, tagged="1+"),
    ],
)
