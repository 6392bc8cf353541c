"""ShareAcknowledge (key 79): a share-group member acknowledges delivered records without
fetching more (ACCEPT 1, RELEASE 2, REJECT 3, RENEW 4 per offset range), within its share session.

Valid versions 1-2, all flexible; version 2 adds renew-only acknowledgements (KIP-1222) and the
lock timeout in the response.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT16, INT32, NULL, STRING, UUID, Array, Struct, f, message
from .share_fetch import ACKNOWLEDGEMENT_BATCH, LEADER_ID_AND_EPOCH, NODE_ENDPOINT

_PARTITION = Struct(
    [
        f("partition_index", INT32),
        f("acknowledgement_batches", Array(ACKNOWLEDGEMENT_BATCH)),
    ]
)
_TOPIC = Struct(
    [
        f("topic_id", UUID),
        f("partitions", Array(_PARTITION)),
    ]
)

REQUEST = message(
    "ShareAcknowledgeRequest",
    ApiKey.SHARE_ACKNOWLEDGE,
    "1-2",
    "0+",
    [
        f("group_id", STRING, nullable="0+", default=NULL),
        f("member_id", STRING, nullable="0+"),
        f("share_session_epoch", INT32),
        f("is_renew_ack", BOOL, "2+"),
        f("topics", Array(_TOPIC)),
    ],
)

_PARTITION_DATA = Struct(
    [
        f("partition_index", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=NULL),
        f("current_leader", LEADER_ID_AND_EPOCH),
    ]
)
_TOPIC_RESPONSE = Struct(
    [
        f("topic_id", UUID),
        f("partitions", Array(_PARTITION_DATA)),
    ]
)

RESPONSE = message(
    "ShareAcknowledgeResponse",
    ApiKey.SHARE_ACKNOWLEDGE,
    "1-2",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=NULL),
        f("acquisition_lock_timeout_ms", INT32, "2+"),
        f("responses", Array(_TOPIC_RESPONSE)),
        f("node_endpoints", Array(NODE_ENDPOINT)),
    ],
)
