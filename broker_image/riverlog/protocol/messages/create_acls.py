"""CreateAcls (key 30): add ACL bindings (security/acl.py); one result per creation, in order.

Versions 1-3 (as Kafka 4 serves them), flexible from 2.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT8, INT16, INT32, STRING, Array, Struct, f, message

_CREATION = Struct(
    [
        f("resource_type", INT8),
        f("resource_name", STRING),
        f("resource_pattern_type", INT8, "1+", default=3),
        f("principal", STRING),
        f("host", STRING),
        f("operation", INT8),
        f("permission_type", INT8),
    ]
)

REQUEST = message("CreateAclsRequest", ApiKey.CREATE_ACLS, "1-3", "2+", [f("creations", Array(_CREATION))])

_RESULT = Struct([f("error_code", INT16), f("error_message", STRING, nullable="0+")])

RESPONSE = message(
    "CreateAclsResponse",
    ApiKey.CREATE_ACLS,
    "1-3",
    "2+",
    [f("throttle_time_ms", INT32), f("results", Array(_RESULT))],
)
