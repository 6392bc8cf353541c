"""DeleteRecords (key 21): advance partitions' log start offsets (offset -1: the high watermark).

Kafka 4.x: valid versions 0-2, flexible from 2.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, INT64, STRING, Array, Struct, f, message

_DELETE_RECORDS_PARTITION = Struct(
    [
        f("partition_index", INT32),
        f("offset", INT64),
    ]
)
_DELETE_RECORDS_TOPIC = Struct(
    [
        f("name", STRING),
        f("partitions", Array(_DELETE_RECORDS_PARTITION)),
    ]
)

REQUEST = message(
    "DeleteRecordsRequest",
    ApiKey.DELETE_RECORDS,
    "0-2",
    "2+",
    [
        f("topics", Array(_DELETE_RECORDS_TOPIC)),
        f("timeout_ms", INT32),
    ],
)

_DELETE_RECORDS_PARTITION_RESULT = Struct(
    [
        f("partition_index", INT32),
        f("low_watermark", INT64),
        f("error_code", INT16),
    ]
)
_DELETE_RECORDS_TOPIC_RESULT = Struct(
    [
        f("name", STRING),
        f("partitions", Array(_DELETE_RECORDS_PARTITION_RESULT)),
    ]
)

RESPONSE = message(
    "DeleteRecordsResponse",
    ApiKey.DELETE_RECORDS,
    "0-2",
    "2+",
    [
        f("throttle_time_ms", INT32),
        f("topics", Array(_DELETE_RECORDS_TOPIC_RESULT)),
    ],
)
