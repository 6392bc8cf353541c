"""OffsetCommit (key 8): commit consumed offsets for a group.

Valid versions 2-10 (Kafka 4.0 removed versions 0-1, KIP-896; ``commit_timestamp`` is still
declared for version 1, as in the spec). Version 8 is the first flexible version; version 10
names topics by id instead of by name.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, INT64, NULL, STRING, UUID, Array, Struct, f, message

_OFFSET_COMMIT_REQUEST_PARTITION = Struct(
    [
        f("partition_index", INT32),
        f("committed_offset", INT64),
        f("committed_leader_epoch", INT32, "6+", default=-1),
        f("commit_timestamp", INT64, "1", default=-1),
        f("committed_metadata", STRING, nullable="0+"),
    ]
)
_OFFSET_COMMIT_REQUEST_TOPIC = Struct(
    [
        f("name", STRING, "0-9"),
        f("topic_id", UUID, "10+"),
        f("partitions", Array(_OFFSET_COMMIT_REQUEST_PARTITION)),
    ]
)

REQUEST = message(
    "OffsetCommitRequest",
    ApiKey.OFFSET_COMMIT,
    "2-10",
    "8+",
    [
        f("group_id", STRING),
        # The generation of a classic group, or the member epoch of a consumer (KIP-848) group.
        f("generation_id_or_member_epoch", INT32, "1+", default=-1),
        f("member_id", STRING, "1+"),
        f("group_instance_id", STRING, "7+", nullable="7+", default=NULL),
        f("retention_time_ms", INT64, "2-4", default=-1),
        f("topics", Array(_OFFSET_COMMIT_REQUEST_TOPIC)),
    ],
)

_OFFSET_COMMIT_RESPONSE_PARTITION = Struct(
    [
        f("partition_index", INT32),
        f("error_code", INT16),
    ]
)
_OFFSET_COMMIT_RESPONSE_TOPIC = Struct(
    [
        f("name", STRING, "0-9"),
        f("topic_id", UUID, "10+"),
        f("partitions", Array(_OFFSET_COMMIT_RESPONSE_PARTITION)),
    ]
)

RESPONSE = message(
    "OffsetCommitResponse",
    ApiKey.OFFSET_COMMIT,
    "2-10",
    "8+",
    [
        f("throttle_time_ms", INT32, "3+"),
        f("topics", Array(_OFFSET_COMMIT_RESPONSE_TOPIC)),
    ],
)
