"""DeleteShareGroupState (key 86): the group coordinator has the share coordinator drop the
durable state of a share group's partitions (group deleted, offsets deleted).
Broker-to-broker; version 0, flexible.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT32, STRING, UUID, Array, Struct, f, message
from .initialize_share_group_state import TOPIC_RESULT

REQUEST = message(
    "DeleteShareGroupStateRequest",
    ApiKey.DELETE_SHARE_GROUP_STATE,
    "0",
    "0+",
    [
        f("group_id", STRING),
        f(
            "topics",
            Array(Struct([f("topic_id", UUID), f("partitions", Array(Struct([f("partition", INT32)])))])),
        ),
    ],
)

RESPONSE = message(
    "DeleteShareGroupStateResponse",
    ApiKey.DELETE_SHARE_GROUP_STATE,
    "0",
    "0+",
    [f("results", Array(TOPIC_RESULT))],
)
