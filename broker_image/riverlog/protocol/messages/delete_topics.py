"""DeleteTopics (key 20): delete topics by name (versions 0-5) or by name or id (version 6+).

Valid versions 1-6 (Kafka 4.0 removed version 0, KIP-896). Version 4 is the first flexible
version.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, NULL, STRING, UUID, Array, Struct, f, message

_DELETE_TOPIC_STATE = Struct(
    [
        f("name", STRING, "6+", nullable="6+", default=NULL),
        f("topic_id", UUID, "6+"),
    ]
)

REQUEST = message(
    "DeleteTopicsRequest",
    ApiKey.DELETE_TOPICS,
    "1-6",
    "4+",
    [
        f("topics", Array(_DELETE_TOPIC_STATE), "6+"),
        f("topic_names", Array(STRING), "0-5"),
        f("timeout_ms", INT32),
    ],
)

_DELETABLE_TOPIC_RESULT = Struct(
    [
        f("name", STRING, nullable="6+"),
        f("topic_id", UUID, "6+"),
        f("error_code", INT16),
        f("error_message", STRING, "5+", nullable="5+", default=NULL),
    ]
)

RESPONSE = message(
    "DeleteTopicsResponse",
    ApiKey.DELETE_TOPICS,
    "1-6",
    "4+",
    [
        f("throttle_time_ms", INT32, "1+"),
        f("responses", Array(_DELETABLE_TOPIC_RESULT)),
    ],
)
