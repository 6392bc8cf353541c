"""DescribeAcls (key 29): the ACL bindings matching one filter, grouped by resource pattern.

Versions 1-3, flexible from 2. Null name, principal or host filters match anything.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT8, INT16, INT32, STRING, Array, Struct, f, message

# One ACL binding filter; DeleteAcls carries a list of them.
FILTER_FIELDS = [
    f("resource_type_filter", INT8),
    f("resource_name_filter", STRING, nullable="0+"),
    f("pattern_type_filter", INT8, "1+", default=3),
    f("principal_filter", STRING, nullable="0+"),
    f("host_filter", STRING, nullable="0+"),
    f("operation", INT8),
    f("permission_type", INT8),
]

REQUEST = message("DescribeAclsRequest", ApiKey.DESCRIBE_ACLS, "1-3", "2+", FILTER_FIELDS)

_ACL = Struct([f("principal", STRING), f("host", STRING), f("operation", INT8), f("permission_type", INT8)])
_RESOURCE = Struct(
    [
        f("resource_type", INT8),
        f("resource_name", STRING),
        f("pattern_type", INT8, "1+", default=3),
        f("acls", Array(_ACL)),
    ]
)

RESPONSE = message(
    "DescribeAclsResponse",
    ApiKey.DESCRIBE_ACLS,
    "1-3",
    "2+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
        f("resources", Array(_RESOURCE)),
    ],
)
