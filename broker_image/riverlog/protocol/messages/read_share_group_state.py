"""ReadShareGroupState (key 84): a partition leader that becomes a share-partition's home reads
its durable state from the share coordinator -- the start offset and the in-flight batches with
their delivery states and counts. Broker-to-broker; version 0, flexible.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT8, INT16, INT32, INT64, NULL, STRING, UUID, Array, Struct, f, message

# An in-flight offset range with one delivery state (0 available, 2 acknowledged, 4 archived)
# and delivery count; WriteShareGroupState sends the same.
STATE_BATCH = Struct(
    [
        f("first_offset", INT64),
        f("last_offset", INT64),
        f("delivery_state", INT8),
        f("delivery_count", INT16),
    ]
)

REQUEST = message(
    "ReadShareGroupStateRequest",
    ApiKey.READ_SHARE_GROUP_STATE,
    "0",
    "0+",
    [
        f("group_id", STRING),
        f(
            "topics",
            Array(
                Struct(
                    [
                        f("topic_id", UUID),
                        f("partitions", Array(Struct([f("partition", INT32), f("leader_epoch", INT32)]))),
                    ]
                )
            ),
        ),
    ],
)

_PARTITION_RESULT = Struct(
    [
        f("partition", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=NULL),
        f("state_epoch", INT32),
        f("start_offset", INT64),
        f("state_batches", Array(STATE_BATCH)),
    ]
)

RESPONSE = message(
    "ReadShareGroupStateResponse",
    ApiKey.READ_SHARE_GROUP_STATE,
    "0",
    "0+",
    [
        f(
            "results",
            Array(Struct([f("topic_id", UUID), f("partitions", Array(_PARTITION_RESULT))])),
        )
    ],
)
