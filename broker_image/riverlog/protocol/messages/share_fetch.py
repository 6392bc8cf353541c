"""ShareFetch (key 78): a share-group member fetches records from partition leaders. The leader
acquires in-flight records for the member (locked until ``AcquisitionLockTimeoutMs``) and says
which offsets ranges it acquired and how often each was delivered; acknowledgements of earlier
deliveries may ride on the same request (ACCEPT 1, RELEASE 2, REJECT 3, RENEW 4; 0 marks a gap).

A share session (``ShareSessionEpoch``: 0 opens, -1 closes, otherwise increments) lets later
requests name only the partitions that change, like a fetch session.

Valid versions 1-2, all flexible. Version 1 added ``MaxRecords``/``BatchSize`` (KIP-1199) and the
lock timeout in the response; version 2 the acquire mode (batch-optimized or record limit) and
renew acknowledgements (KIP-1222). ``PartitionMaxBytes`` exists only in version 0, which is gone.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT8, INT16, INT32, INT64, NULL, RECORDS, STRING, UUID, Array, Struct, f, message

ACKNOWLEDGEMENT_BATCH = Struct(
    [
        f("first_offset", INT64),
        f("last_offset", INT64),
        # One type for the whole range, or one per offset.
        f("acknowledge_types", Array(INT8)),
    ]
)
_FETCH_PARTITION = Struct(
    [
        f("partition_index", INT32),
        f("partition_max_bytes", INT32, "0"),
        f("acknowledgement_batches", Array(ACKNOWLEDGEMENT_BATCH)),
    ]
)
_FETCH_TOPIC = Struct(
    [
        f("topic_id", UUID),
        f("partitions", Array(_FETCH_PARTITION)),
    ]
)
_FORGOTTEN_TOPIC = Struct(
    [
        f("topic_id", UUID),
        f("partitions", Array(INT32)),
    ]
)

REQUEST = message(
    "ShareFetchRequest",
    ApiKey.SHARE_FETCH,
    "1-2",
    "0+",
    [
        f("group_id", STRING, nullable="0+", default=NULL),
        # Nullable with no null default: Kafka's generator defaults it to "".
        f("member_id", STRING, nullable="0+"),
        f("share_session_epoch", INT32),
        f("max_wait_ms", INT32),
        f("min_bytes", INT32),
        f("max_bytes", INT32, default=0x7FFFFFFF),
        f("max_records", INT32, "1+"),
        f("batch_size", INT32, "1+"),
        f("share_acquire_mode", INT8, "2+"),
        f("is_renew_ack", BOOL, "2+"),
        f("topics", Array(_FETCH_TOPIC)),
        f("forgotten_topics_data", Array(_FORGOTTEN_TOPIC)),
    ],
)

LEADER_ID_AND_EPOCH = Struct(
    [
        f("leader_id", INT32),
        f("leader_epoch", INT32),
    ]
)
_ACQUIRED_RECORDS = Struct(
    [
        f("first_offset", INT64),
        f("last_offset", INT64),
        f("delivery_count", INT16),
    ]
)
_PARTITION_DATA = Struct(
    [
        f("partition_index", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=NULL),
        f("acknowledge_error_code", INT16),
        f("acknowledge_error_message", STRING, nullable="0+", default=NULL),
        f("current_leader", LEADER_ID_AND_EPOCH),
        f("records", RECORDS, nullable="0"),
        f("acquired_records", Array(_ACQUIRED_RECORDS)),
    ]
)
_TOPIC_RESPONSE = Struct(
    [
        f("topic_id", UUID),
        f("partitions", Array(_PARTITION_DATA)),
    ]
)
NODE_ENDPOINT = Struct(
    [
        f("node_id", INT32),
        f("host", STRING),
        f("port", INT32),
        f("rack", STRING, nullable="0+", default=NULL),
    ]
)

RESPONSE = message(
    "ShareFetchResponse",
    ApiKey.SHARE_FETCH,
    "1-2",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=NULL),
        f("acquisition_lock_timeout_ms", INT32, "1+"),
        f("responses", Array(_TOPIC_RESPONSE)),
        f("node_endpoints", Array(NODE_ENDPOINT)),
    ],
)
