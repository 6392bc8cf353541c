"""ConsumerGroupHeartbeat (key 68): a member of a KIP-848 consumer group (``group.protocol=consumer``)
joins, heartbeats, reports what it owns and learns its assignment; epoch -1 leaves, -2 leaves as a
static member that will come back.

Valid versions 0-1, all flexible. Version 1 adds ``subscribed_topic_regex`` and has the client
generate its own member id (KIP-1082). A request's nullable fields are null when they did not
change since the member's previous heartbeat.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, NULL, STRING, UUID, Array, Struct, f, message

_TOPIC_PARTITIONS = Struct(
    [
        f("topic_id", UUID),
        f("partitions", Array(INT32)),
    ]
)

REQUEST = message(
    "ConsumerGroupHeartbeatRequest",
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    "0-1",
    "0+",
    [
        f("group_id", STRING),
        f("member_id", STRING),
        f("member_epoch", INT32),
        f("instance_id", STRING, nullable="0+", default=NULL),
        f("rack_id", STRING, nullable="0+", default=NULL),
        f("rebalance_timeout_ms", INT32, default=-1),
        f("subscribed_topic_names", Array(STRING), nullable="0+", default=NULL),
        f("subscribed_topic_regex", STRING, "1+", nullable="1+", default=NULL),
        f("server_assignor", STRING, nullable="0+", default=NULL),
        f("topic_partitions", Array(_TOPIC_PARTITIONS), nullable="0+", default=NULL),
    ],
)

_ASSIGNMENT = Struct([f("topic_partitions", Array(_TOPIC_PARTITIONS))])

RESPONSE = message(
    "ConsumerGroupHeartbeatResponse",
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    "0-1",
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
