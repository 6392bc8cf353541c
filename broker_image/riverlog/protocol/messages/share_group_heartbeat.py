"""ShareGroupHeartbeat (key 76): a member of a KIP-932 share group joins (epoch 0), heartbeats
and learns the partitions it may fetch from; epoch -1 leaves.

Valid version 1 only (version 0 was Kafka 4.0's early-access form and is gone), flexible. Unlike
a consumer group's heartbeat there is no owned-partitions report, instance id or assignor: a share
group's partitions are shared, so nothing has to be revoked before it is assigned elsewhere.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, NULL, STRING, UUID, Array, Struct, f, message

REQUEST = message(
    "ShareGroupHeartbeatRequest",
    ApiKey.SHARE_GROUP_HEARTBEAT,
    "1",
    "0+",
    [
        f("group_id", STRING),
        f("member_id", STRING),
        f("member_epoch", INT32),
        f("rack_id", STRING, nullable="0+", default=NULL),
        f("subscribed_topic_names", Array(STRING), nullable="0+", default=NULL),
    ],
)

_TOPIC_PARTITIONS = Struct(
    [
        f("topic_id", UUID),
        f("partitions", Array(INT32)),
    ]
)
_ASSIGNMENT = Struct([f("topic_partitions", Array(_TOPIC_PARTITIONS))])

RESPONSE = message(
    "ShareGroupHeartbeatResponse",
    ApiKey.SHARE_GROUP_HEARTBEAT,
    "1",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=NULL),
        f("member_id", STRING, nullable="0+", default=NULL),
        f("member_epoch", INT32),
        f("heartbeat_interval_ms", INT32),
        f("assignment", _ASSIGNMENT, nullable="0+", default=NULL),
    ],
)
