"""WriteShareGroupState (key 85): a share-partition's leader writes its durable state to the share
coordinator -- start offset and the in-flight batches whose state or count changed.
Broker-to-broker; versions 0-1, flexible; version 1 adds the delivery-complete count (KIP-1226),
ignorable.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT32, INT64, STRING, UUID, Array, Struct, f, message
from .initialize_share_group_state import TOPIC_RESULT
from .read_share_group_state import STATE_BATCH

_PARTITION = Struct(
    [
        f("partition", INT32),
        f("state_epoch", INT32),
        f("leader_epoch", INT32),
        f("start_offset", INT64),
        f("delivery_complete_count", INT32, "1+", default=-1),
        f("state_batches", Array(STATE_BATCH)),
    ]
)

REQUEST = message(
    "WriteShareGroupStateRequest",
    ApiKey.WRITE_SHARE_GROUP_STATE,
    "0-1",
    "0+",
    [
        f("group_id", STRING),
        f("topics", Array(Struct([f("topic_id", UUID), f("partitions", Array(_PARTITION))]))),
    ],
)

RESPONSE = message(
    "WriteShareGroupStateResponse",
    ApiKey.WRITE_SHARE_GROUP_STATE,
    "0-1",
    "0+",
    [f("results", Array(TOPIC_RESULT))],
)
