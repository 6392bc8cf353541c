"""Schema of TxnOffsetCommit (key 28), the group coordinator's transactional offset commit.

The shared checks of ``protocol_crosscheck`` for every valid version (round trips; the schema
against Kafka's JSON; the wire bytes against kafka-python's JSON-driven codec both ways and
against the hand-written legacy classes), then what is particular to this API.
"""

from __future__ import annotations

import pytest
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.messages import txn_offset_commit
from riverlog.protocol.schema import MAX_VERSION, Message
from support import protocol_crosscheck as crosscheck
from support.protocol_samples import roundtrip

pytestmark = [
    pytest.mark.unit,
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

MODULES = [txn_offset_commit]
MESSAGES: list[Message] = [txn_offset_commit.REQUEST, txn_offset_commit.RESPONSE]
# Kafka 4.x: versions 0-5, flexible from 3.
EXPECTED = {ApiKey.TXN_OFFSET_COMMIT: ((0, 5), (3, MAX_VERSION))}
LEGACY_COVERAGE = {"TxnOffsetCommit": range(0, 3)}

CASES = crosscheck.cases(MESSAGES)

test_version_ranges = crosscheck.version_ranges_test(MODULES, EXPECTED)
test_schema_matches_kafka_json = crosscheck.schema_matches_kafka_json_test(MESSAGES)
test_roundtrip_populated = crosscheck.roundtrip_populated_test(CASES)
test_roundtrip_nulls = crosscheck.roundtrip_nulls_test(CASES)
test_missing_keys_take_defaults = crosscheck.missing_keys_take_defaults_test(CASES)
test_kafka_python_json_codec_agrees = crosscheck.kafka_python_json_codec_test(
    CASES, ("kafka.protocol.producer.transaction",))

LEGACY_CASES = crosscheck.legacy_cases(MESSAGES)
test_legacy_cross_check_coverage = crosscheck.legacy_cross_check_coverage_test(LEGACY_CASES, LEGACY_COVERAGE)
test_legacy_codec_agrees = crosscheck.legacy_codec_test(LEGACY_CASES)


def test_group_metadata_only_from_version_3() -> None:
    base = {"transactional_id": "tx", "group_id": "g", "producer_id": 5, "producer_epoch": 1,
            "generation_id": 4, "member_id": "m", "group_instance_id": "i",
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 9,
                                                     "committed_leader_epoch": 2, "committed_metadata": None}]}]}
    v1 = roundtrip(txn_offset_commit.REQUEST, 1, base)
    assert (v1["generation_id"], v1["member_id"], v1["group_instance_id"]) == (-1, "", None)
    assert v1["topics"][0]["partitions"][0]["committed_leader_epoch"] == -1
    v3 = roundtrip(txn_offset_commit.REQUEST, 3, base)
    assert (v3["generation_id"], v3["member_id"], v3["group_instance_id"]) == (4, "m", "i")
    assert v3["topics"][0]["partitions"][0]["committed_leader_epoch"] == 2
