"""UpdateFeatures (key 57): change the cluster's finalized feature levels (KIP-584).

Kafka 4.x: valid versions 0-2, flexible from 0. Version 1 replaces ``allow_downgrade`` with
``upgrade_type`` (1 upgrade, 2 safe downgrade, 3 unsafe downgrade) and adds ``validate_only``;
version 2 answers with the top-level error only (no per-feature results).
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT8, INT16, INT32, STRING, Array, Struct, f, message

_UPDATE = Struct(
    [
        f("feature", STRING),
        f("max_version_level", INT16),
        f("allow_downgrade", BOOL, "0"),
        f("upgrade_type", INT8, "1+", default=1),
    ]
)

REQUEST = message(
    "UpdateFeaturesRequest",
    ApiKey.UPDATE_FEATURES,
    "0-2",
    "0+",
    [
        f("timeout_ms", INT32, default=60_000),
        f("feature_updates", Array(_UPDATE)),
        f("validate_only", BOOL, "1+", default=False),
    ],
)

_RESULT = Struct(
    [
        f("feature", STRING),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
    ]
)

RESPONSE = message(
    "UpdateFeaturesResponse",
    ApiKey.UPDATE_FEATURES,
    "0-2",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
        f("results", Array(_RESULT), "0-1"),
    ],
)
