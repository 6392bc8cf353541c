"""Finalized features: UpdateFeatures' schema, the controller's decisions
(``controller/features.py``), the image and snapshot that keep them, and the forwarded call that
carries them, for ``transaction.version`` (what Java clients read to speak transaction version 2)."""

from __future__ import annotations

import pytest
import riverlog.controller.quorum.codec as codec
from riverlog.controller.features import (
    SAFE_DOWNGRADE,
    TRANSACTION_VERSION,
    UNSAFE_DOWNGRADE,
    UPGRADE,
    FeatureOutcome,
    FeatureUpdate,
    finalized_features,
    finalized_level,
    update_features,
)
from riverlog.controller.image import MetadataImage
from riverlog.controller.records import FeatureLevelRecord, from_json, to_json
from riverlog.controller.snapshot import image_to_records
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode
from riverlog.protocol.messages import update_features as update_features_api
from riverlog.protocol.schema import MAX_VERSION
from support import protocol_crosscheck as crosscheck
from support.protocol_samples import roundtrip

pytestmark = [
    pytest.mark.unit,
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

MESSAGES = [update_features_api.REQUEST, update_features_api.RESPONSE]
CASES = crosscheck.cases(MESSAGES)
test_version_ranges = crosscheck.version_ranges_test(
    [update_features_api], {ApiKey.UPDATE_FEATURES: ((0, 2), (0, MAX_VERSION))})
test_schema_matches_kafka_json = crosscheck.schema_matches_kafka_json_test(MESSAGES)
test_roundtrip_populated = crosscheck.roundtrip_populated_test(CASES)
test_roundtrip_nulls = crosscheck.roundtrip_nulls_test(CASES)
test_missing_keys_take_defaults = crosscheck.missing_keys_take_defaults_test(CASES)


def test_upgrade_type_replaces_allow_downgrade_and_v2_has_no_results() -> None:
    update = {"feature": TRANSACTION_VERSION, "max_version_level": 1, "allow_downgrade": True, "upgrade_type": 2}
    v0 = roundtrip(update_features_api.REQUEST, 0, {"feature_updates": [update], "validate_only": True})
    assert v0["feature_updates"][0]["allow_downgrade"] is True and v0["validate_only"] is False
    v1 = roundtrip(update_features_api.REQUEST, 1, {"feature_updates": [update], "validate_only": True})
    assert v1["feature_updates"][0]["upgrade_type"] == 2 and v1["validate_only"] is True
    results = [{"feature": TRANSACTION_VERSION, "error_code": 0, "error_message": None}]
    assert roundtrip(update_features_api.RESPONSE, 1, {"results": results})["results"] == results
    assert roundtrip(update_features_api.RESPONSE, 2, {"results": results})["results"] == []


def test_a_cluster_that_never_set_it_runs_transaction_version_2() -> None:
    image = MetadataImage("c")
    assert finalized_level(image, TRANSACTION_VERSION) == 2
    assert finalized_features(image) == {TRANSACTION_VERSION: 2}
    assert finalized_level(image, "no.such.feature") == 0


@pytest.mark.parametrize(("level", "upgrade_type", "error"), [
    (1, SAFE_DOWNGRADE, ErrorCode.NONE),
    (1, UNSAFE_DOWNGRADE, ErrorCode.NONE),
    (0, SAFE_DOWNGRADE, ErrorCode.NONE),  # removes the feature
    (2, UPGRADE, ErrorCode.NONE),  # the level it has: fine
    (1, UPGRADE, ErrorCode.INVALID_UPDATE_VERSION),  # a downgrade must say so
    (3, UPGRADE, ErrorCode.INVALID_UPDATE_VERSION),  # above what is supported
    (-1, SAFE_DOWNGRADE, ErrorCode.INVALID_UPDATE_VERSION),
    (1, 7, ErrorCode.INVALID_UPDATE_VERSION),  # unknown upgrade type
])
def test_update_decisions(level: int, upgrade_type: int, error: ErrorCode) -> None:
    image = MetadataImage("c")
    outcomes, records = update_features(image, [FeatureUpdate(TRANSACTION_VERSION, level, upgrade_type)])
    assert [o.error for o in outcomes] == [error]
    if error == ErrorCode.NONE:
        assert records == [FeatureLevelRecord(TRANSACTION_VERSION, level)]
        assert finalized_level(image.apply(records), TRANSACTION_VERSION) == level
    else:
        assert records == [] and outcomes[0].message


def test_updates_are_all_or_nothing_and_unknown_features_are_refused() -> None:
    outcomes, records = update_features(MetadataImage("c"), [
        FeatureUpdate(TRANSACTION_VERSION, 1, SAFE_DOWNGRADE), FeatureUpdate("metadata.version", 20)])
    assert [o.error for o in outcomes] == [ErrorCode.NONE, ErrorCode.INVALID_UPDATE_VERSION]
    assert records == []


def test_level_0_unlists_the_feature_and_snapshots_keep_levels() -> None:
    image = MetadataImage("c").apply([FeatureLevelRecord(TRANSACTION_VERSION, 0)])
    assert finalized_features(image) == {}
    rebuilt = MetadataImage("c").apply(image_to_records(image))
    assert rebuilt.features == {TRANSACTION_VERSION: 0}
    record = FeatureLevelRecord(TRANSACTION_VERSION, 1)
    assert from_json(to_json(record)) == record


def test_forwarded_calls_carry_updates_and_outcomes() -> None:
    updates = [FeatureUpdate(TRANSACTION_VERSION, 1, SAFE_DOWNGRADE)]
    outcome = [FeatureOutcome(TRANSACTION_VERSION, ErrorCode.INVALID_UPDATE_VERSION, "why")]
    assert codec.from_wire(codec.to_wire(updates)) == updates
    assert codec.from_wire(codec.to_wire(outcome)) == outcome
