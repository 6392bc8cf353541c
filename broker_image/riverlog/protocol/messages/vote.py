"""Vote (key 52): a KRaft candidate asks a voter for its vote in an epoch (KIP-595).

Kafka 4.x: valid versions 0-2, flexible in all. Version 1 adds the voter key (``voter_id`` and
``voter_directory_id``), the candidate's directory id and the response's tagged node endpoints
(KIP-853); version 2 adds ``pre_vote`` (KIP-996), and Kafka's JSON renames Candidate* to Replica*
there (same wire fields, so the names here are the new ones for every version).
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT16, INT32, INT64, NULL, STRING, UINT16, UUID, Array, Struct, f, message

_PARTITION_REQUEST = Struct(
    [
        f("partition_index", INT32),
        f("replica_epoch", INT32),  # the epoch the candidate runs (or, pre-voting, would run) in
        f("replica_id", INT32),
        f("replica_directory_id", UUID, "1+"),
        f("voter_directory_id", UUID, "1+"),
        f("last_offset_epoch", INT32),
        f("last_offset", INT64),  # the candidate's log end offset
        f("pre_vote", BOOL, "2+"),
    ]
)
_TOPIC_REQUEST = Struct(
    [
        f("topic_name", STRING),
        f("partitions", Array(_PARTITION_REQUEST)),
    ]
)

REQUEST = message(
    "VoteRequest",
    ApiKey.VOTE,
    "0-2",
    "0+",
    [
        f("cluster_id", STRING, nullable="0+", default=NULL),
        f("voter_id", INT32, "1+", default=-1),
        f("topics", Array(_TOPIC_REQUEST)),
    ],
)

_PARTITION_RESPONSE = Struct(
    [
        f("partition_index", INT32),
        f("error_code", INT16),
        f("leader_id", INT32),
        f("leader_epoch", INT32),
        f("vote_granted", BOOL),
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
    "VoteResponse",
    ApiKey.VOTE,
    "0-2",
    "0+",
    [
        f("error_code", INT16),
        f("topics", Array(_TOPIC_RESPONSE)),
        f("node_endpoints", Array(_NODE_ENDPOINT), "1+", tag=0, tagged="1+"),
    ],
)
