"""Group-level configs (resource type GROUP, 32): Kafka 4.3's validation and messages, defaults
from the broker's synonyms, the values a group runs with, where a share-partition without state
starts, the controller's records, and the share group coordinator using a group's own session
timeout and heartbeat interval."""

from __future__ import annotations

import uuid

import pytest
from riverlog.config import DEFAULTS
from riverlog.controller.group_config_ops import alter_group_configs
from riverlog.controller.image import MetadataImage
from riverlog.controller.records import ConfigRecord
from riverlog.coordinator.config import GroupConfig
from riverlog.coordinator.consumer_records import TopicMetadata
from riverlog.group_config import (
    EARLIEST,
    GROUP_CONFIGS,
    GROUP_RESOURCE,
    LATEST,
    InvalidGroupConfig,
    ShareReset,
    default_value,
    effective_int,
    limits_from,
    parse_iso_duration_ms,
    parse_share_reset,
    share_reset,
    validate,
)
from riverlog.protocol.errors import ErrorCode
from riverlog.share.partition import reset_start_offset
from support.group_harness import Harness

pytestmark = pytest.mark.unit

LIMITS = limits_from(DEFAULTS)


def refusal(values: dict[str, str], limits: dict[str, str] | None = None) -> str:
    with pytest.raises(InvalidGroupConfig) as info:
        validate(values, limits or LIMITS)
    return str(info.value)


def test_kafka_4_3_names_in_its_order() -> None:
    assert list(GROUP_CONFIGS)[:11] == [
        "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "consumer.assignment.interval.ms",
        "share.session.timeout.ms", "share.heartbeat.interval.ms", "share.record.lock.duration.ms",
        "share.delivery.count.limit", "share.partition.max.record.locks", "share.auto.offset.reset",
        "share.isolation.level", "share.renew.acknowledge.enable"]
    assert len(GROUP_CONFIGS) == 17


def test_defaults_come_from_the_broker_synonyms() -> None:
    limits = limits_from({**DEFAULTS, "group.share.record.lock.duration.ms": "20000"})
    assert default_value(GROUP_CONFIGS["share.record.lock.duration.ms"], limits) == "20000"
    assert default_value(GROUP_CONFIGS["share.delivery.count.limit"], LIMITS) == "5"
    assert default_value(GROUP_CONFIGS["share.auto.offset.reset"], LIMITS) == "latest"
    assert default_value(GROUP_CONFIGS["share.isolation.level"], LIMITS) == "read_uncommitted"
    # A synonym Riverlog's broker does not define has Kafka's default.
    assert default_value(GROUP_CONFIGS["streams.num.standby.replicas"], LIMITS) == "0"


def test_valid_values_pass() -> None:
    validate({"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "15000",
              "share.delivery.count.limit": "10", "share.partition.max.record.locks": "100",
              "share.session.timeout.ms": "60000", "share.heartbeat.interval.ms": "15000",
              "consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "6000",
              "share.isolation.level": "read_uncommitted", "share.renew.acknowledge.enable": "true"}, LIMITS)
    validate({"share.auto.offset.reset": "by_duration:PT1H"}, LIMITS)


def test_kafkas_messages_for_bad_names_and_values() -> None:
    assert refusal({"share.sometimes": "1"}) == "Unknown group config name: share.sometimes"
    assert refusal({"share.delivery.count.limit": "five"}) == \
        "Invalid value five for configuration share.delivery.count.limit: Not a number of type INT"
    assert refusal({"share.record.lock.duration.ms": "500"}) == \
        "Invalid value 500 for configuration share.record.lock.duration.ms: Value must be at least 1000"
    assert refusal({"share.record.lock.duration.ms": "90000"}) == \
        "share.record.lock.duration.ms must be less than or equal to group.share.max.record.lock.duration.ms"
    assert refusal({"share.record.lock.duration.ms": "5000"}) == \
        "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"
    assert refusal({"share.delivery.count.limit": "11"}) == \
        "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit"
    assert refusal({"consumer.session.timeout.ms": "30000"}) == \
        "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"
    assert refusal({"share.isolation.level": "maybe"}) == ("Invalid value maybe for configuration "
                                                            "share.isolation.level: String must be one of: "
                                                            "read_committed, read_uncommitted")
    assert refusal({"share.auto.offset.reset": "sometimes"}) == (
        "Invalid value sometimes for configuration share.auto.offset.reset: Invalid value `sometimes` for "
        "configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the "
        "format 'by_duration:<PnDTnHnMn.nS>'.")


def test_session_must_exceed_the_heartbeat_interval_with_defaults_merged() -> None:
    limits = limits_from({**DEFAULTS, "group.share.max.heartbeat.interval.ms": "60000"})
    assert refusal({"share.heartbeat.interval.ms": "45000"}, limits) == \
        "share.session.timeout.ms must be greater than share.heartbeat.interval.ms"


def test_settings_riverlog_cannot_honour_are_refused() -> None:
    validate({"share.isolation.level": "read_committed"}, LIMITS)  # honoured: no refusal
    assert "does not support" in refusal({"share.renew.acknowledge.enable": "false"})
    assert "does not support" in refusal({"streams.num.standby.replicas": "1"})
    assert "does not support" in refusal({"consumer.assignment.interval.ms": "500"})


@pytest.mark.parametrize(("text", "ms"), [
    ("PT1H", 3_600_000), ("P1D", 86_400_000), ("PT0.5S", 500), ("pt2m", 120_000), ("P1DT1H1M1.25S", 90_061_250),
    ("PT0S", 0), ("-PT1S", -1000),
])
def test_iso_durations_as_java_reads_them(text: str, ms: int) -> None:
    assert parse_iso_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["P", "PT", "1H", "PT1", "P1H", "PTS"])
def test_not_iso_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_iso_duration_ms(text)


def test_share_reset_values() -> None:
    assert parse_share_reset("earliest") == EARLIEST
    assert parse_share_reset("by_duration:PT10M") == ShareReset("by_duration", 600_000)
    for bad in ("none", "Earliest", "by_duration", "by_duration:-PT1S", "by_duration:soon"):
        with pytest.raises(ValueError):
            parse_share_reset(bad)
    assert share_reset(None) == LATEST
    assert share_reset({"share.auto.offset.reset": "earliest"}) == EARLIEST


def test_where_a_share_partition_without_state_starts() -> None:
    def lookup(timestamp: int) -> int | None:
        return 12 if timestamp <= 1_000 else None  # offset 12 is the first record at or after 1000

    assert reset_start_offset(LATEST, 5, 20, 0, lookup) == 20
    assert reset_start_offset(EARLIEST, 5, 20, 0, lookup) == 5
    by_duration = ShareReset("by_duration", 500)
    assert reset_start_offset(by_duration, 5, 20, 1_500, lookup) == 12
    assert reset_start_offset(by_duration, 5, 20, 9_000, lookup) == 20  # nothing that recent: the end


def test_effective_values_clamp_to_the_current_bounds() -> None:
    overrides = {"share.record.lock.duration.ms": "60000", "share.delivery.count.limit": "3"}
    assert effective_int(overrides, "share.delivery.count.limit", 5, LIMITS) == 3
    assert effective_int(None, "share.delivery.count.limit", 5, LIMITS) == 5
    tighter = limits_from({**DEFAULTS, "group.share.max.record.lock.duration.ms": "40000"})
    assert effective_int(overrides, "share.record.lock.duration.ms", 30_000, tighter) == 40_000


def test_the_controller_records_the_groups_complete_new_set() -> None:
    image = MetadataImage()
    outcome = alter_group_configs(image, "g", {"share.auto.offset.reset": "earliest"}, replace_all=False,
                                  limits=LIMITS)
    assert outcome.error == ErrorCode.NONE
    assert outcome.records == [ConfigRecord(GROUP_RESOURCE, "g", "share.auto.offset.reset", "earliest")]
    image = image.apply(outcome.records)
    assert image.configs[(GROUP_RESOURCE, "g")] == {"share.auto.offset.reset": "earliest"}
    # Incremental: an invalid addition refuses the whole change.
    bad = alter_group_configs(image, "g", {"share.delivery.count.limit": "1"}, replace_all=False, limits=LIMITS)
    assert bad.error == ErrorCode.INVALID_CONFIG and bad.records == []
    # Legacy AlterConfigs replaces the set: the reset override goes.
    legacy = alter_group_configs(image, "g", {"share.delivery.count.limit": "3"}, replace_all=True, limits=LIMITS)
    assert legacy.records == [ConfigRecord(GROUP_RESOURCE, "g", "share.auto.offset.reset", None),
                              ConfigRecord(GROUP_RESOURCE, "g", "share.delivery.count.limit", "3")]
    empty = alter_group_configs(image, "", {}, replace_all=False, limits=LIMITS)
    assert empty.error == ErrorCode.INVALID_REQUEST


def test_share_group_members_get_the_groups_heartbeat_interval_and_session() -> None:
    h = Harness(config=GroupConfig(initial_rebalance_delay_ms=0))
    h.shard.set_topics({"queue": TopicMetadata(uuid.UUID(int=1), "queue", 1)})
    h.shard.set_group_configs({"g": {"share.heartbeat.interval.ms": "8000", "share.session.timeout.ms": "50000"}})

    def heartbeat(group: str, epoch: int = 0, member: str = "m") -> dict[str, object]:
        body = h.reply(h.run(h.shard.share_group_heartbeat, group, member, epoch, None,
                             ("queue",) if epoch == 0 else None, "c", "/127.0.0.1"))
        assert body is not None and body["error_code"] == ErrorCode.NONE, body
        return body

    assert heartbeat("g")["heartbeat_interval_ms"] == 8000
    assert heartbeat("other")["heartbeat_interval_ms"] == 5000  # the broker's
    h.advance(45_000)  # the broker's session timeout has passed, the group's has not
    assert "m" in h.shard.share_groups["g"].members
    assert "m" not in h.shard.share_groups["other"].members
    h.advance(5_000)
    assert "m" not in h.shard.share_groups["g"].members
