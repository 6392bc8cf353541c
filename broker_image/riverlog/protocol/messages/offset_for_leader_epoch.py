"""OffsetForLeaderEpoch (key 23): the end offset of a leader epoch, for truncation after a
leader change (followers) and log divergence detection (consumers, KIP-320).

Kafka 4.x: valid versions 2-4 (versions 0-1 were removed in Kafka 4.0, KIP-896), flexible from 4.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, INT64, STRING, Array, Struct, f, message

# Version 3 added ReplicaId; -2 is the "debug consumer" that may see past the high watermark.
DEBUGGING_REPLICA_ID = -2

_OFFSET_FOR_LEADER_PARTITION = Struct(
    [
        f("partition", INT32),
        f("current_leader_epoch", INT32, "2+", default=-1),
        f("leader_epoch", INT32),
    ]
)
_OFFSET_FOR_LEADER_TOPIC = Struct(
    [
        f("topic", STRING),
        f("partitions", Array(_OFFSET_FOR_LEADER_PARTITION)),
    ]
)

REQUEST = message(
    "OffsetForLeaderEpochRequest",
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    "2-4",
    "4+",
    [
        f("replica_id", INT32, "3+", default=DEBUGGING_REPLICA_ID),
        f("topics", Array(_OFFSET_FOR_LEADER_TOPIC)),
    ],
)

_EPOCH_END_OFFSET = Struct(
    [
        f("error_code", INT16),
        f("partition", INT32),
        f("leader_epoch", INT32, "1+", default=-1),
        f("end_offset", INT64, default=-1),
    ]
)
_OFFSET_FOR_LEADER_TOPIC_RESULT = Struct(
    [
        f("topic", STRING),
        f("partitions", Array(_EPOCH_END_OFFSET)),
    ]
)

RESPONSE = message(
    "OffsetForLeaderEpochResponse",
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    "2-4",
    "4+",
    [
        f("throttle_time_ms", INT32, "2+"),
        f("topics", Array(_OFFSET_FOR_LEADER_TOPIC_RESULT)),
    ],
)
