"""Schemas of the ACL APIs: DescribeAcls, CreateAcls and DeleteAcls.

The shared checks of ``protocol_crosscheck`` for every valid version (round trips; the schema
against Kafka's JSON; the wire bytes against kafka-python's JSON-driven codec both ways).
"""

from __future__ import annotations

import pytest
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.messages import create_acls, delete_acls, describe_acls
from riverlog.protocol.schema import MAX_VERSION, Message
from support import protocol_crosscheck as crosscheck

pytestmark = [
    pytest.mark.unit,
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

MODULES = [describe_acls, create_acls, delete_acls]
MESSAGES: list[Message] = [m for mod in MODULES for m in (mod.REQUEST, mod.RESPONSE)]
EXPECTED = {
    ApiKey.DESCRIBE_ACLS: ((1, 3), (2, MAX_VERSION)),
    ApiKey.CREATE_ACLS: ((1, 3), (2, MAX_VERSION)),
    ApiKey.DELETE_ACLS: ((1, 3), (2, MAX_VERSION)),
}

CASES = crosscheck.cases(MESSAGES)

test_version_ranges = crosscheck.version_ranges_test(MODULES, EXPECTED)
test_schema_matches_kafka_json = crosscheck.schema_matches_kafka_json_test(MESSAGES)
test_roundtrip_populated = crosscheck.roundtrip_populated_test(CASES)
test_roundtrip_nulls = crosscheck.roundtrip_nulls_test(CASES)
test_missing_keys_take_defaults = crosscheck.missing_keys_take_defaults_test(CASES)
test_kafka_python_json_codec_agrees = crosscheck.kafka_python_json_codec_test(CASES, ("kafka.protocol.admin",))
