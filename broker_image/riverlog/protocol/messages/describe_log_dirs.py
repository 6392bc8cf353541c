"""DescribeLogDirs (key 35): log directories of a broker and the size of each partition in them.

Valid versions 1-5 (Kafka 4.0 removed version 0, KIP-896). Version 2 is the first flexible
version.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT16, INT32, INT64, STRING, Array, Struct, f, message

_DESCRIBABLE_LOG_DIR_TOPIC = Struct(
    [
        f("topic", STRING),
        f("partitions", Array(INT32)),
    ]
)

REQUEST = message(
    "DescribeLogDirsRequest",
    ApiKey.DESCRIBE_LOG_DIRS,
    "1-5",
    "2+",
    [
        # null means every topic
        f("topics", Array(_DESCRIBABLE_LOG_DIR_TOPIC), nullable="0+"),
    ],
)

_DESCRIBE_LOG_DIRS_PARTITION = Struct(
    [
        f("partition_index", INT32),
        f("partition_size", INT64),
        f("offset_lag", INT64),
        f("is_future_key", BOOL),
    ]
)
_DESCRIBE_LOG_DIRS_TOPIC = Struct(
    [
        f("name", STRING),
        f("partitions", Array(_DESCRIBE_LOG_DIRS_PARTITION)),
    ]
)
_DESCRIBE_LOG_DIRS_RESULT = Struct(
    [
        f("error_code", INT16),
        f("log_dir", STRING),
        f("topics", Array(_DESCRIBE_LOG_DIRS_TOPIC)),
        f("total_bytes", INT64, "4+", default=-1),
        f("usable_bytes", INT64, "4+", default=-1),
        f("is_cordoned", BOOL, "5+"),
    ]
)

RESPONSE = message(
    "DescribeLogDirsResponse",
    ApiKey.DESCRIBE_LOG_DIRS,
    "1-5",
    "2+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16, "3+"),
        f("results", Array(_DESCRIBE_LOG_DIRS_RESULT)),
    ],
)
