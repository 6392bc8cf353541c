"""WriteTxnMarkers (key 27): a transaction coordinator asks a partition leader to write the
commit or abort markers of a finished transaction.

Kafka 4.x: valid versions 1-2 (version 0 was removed in 4.0), all flexible; v2 adds the
marker's transaction version.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT8, INT16, INT32, INT64, STRING, Array, Struct, f, message

_MARKER_TOPIC = Struct(
    [
        f("name", STRING),
        f("partition_indexes", Array(INT32)),
    ]
)
_MARKER = Struct(
    [
        f("producer_id", INT64),
        f("producer_epoch", INT16),
        f("transaction_result", BOOL),  # false: abort, true: commit
        f("topics", Array(_MARKER_TOPIC)),
        f("coordinator_epoch", INT32),
        f("transaction_version", INT8, "2+", default=0),
    ]
)

REQUEST = message(
    "WriteTxnMarkersRequest",
    ApiKey.WRITE_TXN_MARKERS,
    "1-2",
    "1+",
    [
        f("markers", Array(_MARKER)),
    ],
)

_PARTITION_RESULT = Struct(
    [
        f("partition_index", INT32),
        f("error_code", INT16),
    ]
)
_TOPIC_RESULT = Struct(
    [
        f("name", STRING),
        f("partitions", Array(_PARTITION_RESULT)),
    ]
)
_MARKER_RESULT = Struct(
    [
        f("producer_id", INT64),
        f("topics", Array(_TOPIC_RESULT)),
    ]
)

RESPONSE = message(
    "WriteTxnMarkersResponse",
    ApiKey.WRITE_TXN_MARKERS,
    "1-2",
    "1+",
    [
        f("markers", Array(_MARKER_RESULT)),
    ],
)
