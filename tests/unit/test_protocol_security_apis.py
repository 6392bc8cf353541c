"""Schemas of the authentication APIs: SaslHandshake, SaslAuthenticate, DescribeUserScramCredentials
and AlterUserScramCredentials.

The shared checks of ``protocol_crosscheck`` for every valid version (round trips; the schema
against Kafka's JSON; the wire bytes against kafka-python's JSON-driven codec both ways).
"""

from __future__ import annotations

import pytest
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.messages import (
    alter_user_scram_credentials,
    describe_user_scram_credentials,
    sasl_authenticate,
    sasl_handshake,
)
from riverlog.protocol.schema import MAX_VERSION, Message
from support import protocol_crosscheck as crosscheck
from support.protocol_samples import roundtrip

pytestmark = [
    pytest.mark.unit,
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

MODULES = [sasl_handshake, sasl_authenticate, describe_user_scram_credentials, alter_user_scram_credentials]
MESSAGES: list[Message] = [m for mod in MODULES for m in (mod.REQUEST, mod.RESPONSE)]
EXPECTED = {
    ApiKey.SASL_HANDSHAKE: ((0, 1), (1, 0)),  # never flexible
    ApiKey.SASL_AUTHENTICATE: ((0, 2), (2, MAX_VERSION)),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: ((0, 0), (0, MAX_VERSION)),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ((0, 0), (0, MAX_VERSION)),
}

CASES = crosscheck.cases(MESSAGES)

test_version_ranges = crosscheck.version_ranges_test(MODULES, EXPECTED)
test_schema_matches_kafka_json = crosscheck.schema_matches_kafka_json_test(MESSAGES)
test_roundtrip_populated = crosscheck.roundtrip_populated_test(CASES)
test_roundtrip_nulls = crosscheck.roundtrip_nulls_test(CASES)
test_missing_keys_take_defaults = crosscheck.missing_keys_take_defaults_test(CASES)
test_kafka_python_json_codec_agrees = crosscheck.kafka_python_json_codec_test(
    CASES, ("kafka.protocol.sasl", "kafka.protocol.admin"))


def test_session_lifetime_is_on_the_wire_from_version_1() -> None:
    body = {"error_code": 0, "error_message": None, "auth_bytes": b"v=x", "session_lifetime_ms": 3_600_000}
    assert roundtrip(sasl_authenticate.RESPONSE, 1, body)["session_lifetime_ms"] == 3_600_000
    assert roundtrip(sasl_authenticate.RESPONSE, 0, body)["session_lifetime_ms"] == 0
