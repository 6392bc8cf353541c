"""DeleteAcls (key 31): remove the ACL bindings matching each filter; per filter, what matched.

Versions 1-3, flexible from 2.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT8, INT16, INT32, STRING, Array, Struct, f, message
from .describe_acls import FILTER_FIELDS

_FILTER = Struct(list(FILTER_FIELDS))

REQUEST = message("DeleteAclsRequest", ApiKey.DELETE_ACLS, "1-3", "2+", [f("filters", Array(_FILTER))])

_MATCHING = Struct(
    [
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
        f("resource_type", INT8),
        f("resource_name", STRING),
        f("pattern_type", INT8, "1+", default=3),
        f("principal", STRING),
        f("host", STRING),
        f("operation", INT8),
        f("permission_type", INT8),
    ]
)
_FILTER_RESULT = Struct(
    [f("error_code", INT16), f("error_message", STRING, nullable="0+"), f("matching_acls", Array(_MATCHING))]
)

RESPONSE = message(
    "DeleteAclsResponse",
    ApiKey.DELETE_ACLS,
    "1-3",
    "2+",
    [f("throttle_time_ms", INT32), f("filter_results", Array(_FILTER_RESULT))],
)
