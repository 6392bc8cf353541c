"""InitializeShareGroupState (key 83): the group coordinator asks the share coordinator to start
a share-partition's durable state at a start offset with a new state epoch (when a topic is first
assigned in a share group, or its offsets are altered). Broker-to-broker; version 0, flexible.

The per-partition result (partition, error code, message) is shared by the share-state RPCs.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, INT64, NULL, STRING, UUID, Array, Struct, f, message

PARTITION_RESULT = Struct(
    [
        f("partition", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=NULL),
    ]
)
TOPIC_RESULT = Struct(
    [
        f("topic_id", UUID),
        f("partitions", Array(PARTITION_RESULT)),
    ]
)

REQUEST = message(
    "InitializeShareGroupStateRequest",
    ApiKey.INITIALIZE_SHARE_GROUP_STATE,
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
                        f(
                            "partitions",
                            Array(
                                Struct(
                                    [
                                        f("partition", INT32),
                                        f("state_epoch", INT32),
                                        f("start_offset", INT64),
                                    ]
                                )
                            ),
                        ),
                    ]
                )
            ),
        ),
    ],
)

RESPONSE = message(
    "InitializeShareGroupStateResponse",
    ApiKey.INITIALIZE_SHARE_GROUP_STATE,
    "0",
    "0+",
    [f("results", Array(TOPIC_RESULT))],
)
