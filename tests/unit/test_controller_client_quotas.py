"""Client quotas in the metadata image: KRaft's rules for AlterClientQuotas and the
DescribeClientQuotas filter, records through JSON, and snapshots that keep them."""

from __future__ import annotations

import pytest
from riverlog.controller.client_quotas import (
    QuotaAlteration,
    QuotaFilter,
    QuotaFilterError,
    QuotaOp,
    alter_quotas,
    describe_quotas,
)
from riverlog.controller.image import MetadataImage
from riverlog.controller.records import ClientQuotaRecord, from_json, to_json
from riverlog.controller.snapshot import image_to_records
from riverlog.protocol.errors import ErrorCode

pytestmark = pytest.mark.unit

ALICE = (("user", "alice"),)
DEFAULT_USER = (("user", None),)
ALICE_APP = (("client-id", "app"), ("user", "alice"))


def applied(image: MetadataImage, *alterations: QuotaAlteration) -> MetadataImage:
    outcomes, records = alter_quotas(image, alterations)
    assert all(o.error == ErrorCode.NONE for o in outcomes), outcomes
    return image.apply(records)


def test_quotas_are_set_changed_and_removed_per_key() -> None:
    image = applied(MetadataImage(), QuotaAlteration(ALICE, (QuotaOp("producer_byte_rate", 1024),
                                                            QuotaOp("request_percentage", 12.5))))
    assert image.client_quotas == {ALICE: {"producer_byte_rate": 1024.0, "request_percentage": 12.5}}
    image = applied(image, QuotaAlteration((("user", "alice"), ("client-id", "app")),
                                           (QuotaOp("consumer_byte_rate", 10),)))
    assert image.client_quotas[ALICE_APP] == {"consumer_byte_rate": 10.0}  # entity sorted by type
    image = applied(image, QuotaAlteration(ALICE, (QuotaOp("producer_byte_rate", 0, remove=True),)))
    assert image.client_quotas[ALICE] == {"request_percentage": 12.5}
    image = applied(image, QuotaAlteration(ALICE, (QuotaOp("request_percentage", 0, remove=True),)))
    assert ALICE not in image.client_quotas  # an entity without quotas is gone


def test_unchanged_values_and_removals_of_nothing_record_nothing() -> None:
    image = applied(MetadataImage(), QuotaAlteration(ALICE, (QuotaOp("producer_byte_rate", 1024),)))
    outcomes, records = alter_quotas(image, [QuotaAlteration(ALICE, (
        QuotaOp("producer_byte_rate", 1024), QuotaOp("consumer_byte_rate", 0, remove=True)))])
    assert [o.error for o in outcomes] == [ErrorCode.NONE] and records == []


@pytest.mark.parametrize(("entity", "ops", "message"), [
    (ALICE, (QuotaOp("producer_byte_rate", 0),), "Quota producer_byte_rate must be greater than 0"),
    (ALICE, (QuotaOp("consumer_byte_rate", -5),), "Quota consumer_byte_rate must be greater than 0"),
    (ALICE, (QuotaOp("producer_byte_rate", 10.5),), "producer_byte_rate cannot be a fractional value."),
    (ALICE, (QuotaOp("producer_byte_rate", 2.0**64),), "producer_byte_rate is too large for a LONG."),
    (ALICE, (QuotaOp("connection_creation_rate", 5),), "Invalid configuration key connection_creation_rate"),
    ((), (QuotaOp("producer_byte_rate", 5),), "Invalid empty client quota entity"),
    ((("group", "g"),), (QuotaOp("producer_byte_rate", 5),), "Unhandled client quota entity type: group"),
    ((("client-id", ""),), (QuotaOp("producer_byte_rate", 5),), "Empty client-id not supported"),
    ((("ip", "10.0.0.1"),), (QuotaOp("connection_creation_rate", 5),), "ip quotas"),
    (ALICE, (QuotaOp("producer_byte_rate", 5), QuotaOp("producer_byte_rate", 6)), "Ignoring duplicate entity"),
])
def test_bad_alterations_are_refused_with_kafkas_messages(entity, ops, message) -> None:
    outcomes, records = alter_quotas(MetadataImage(), [QuotaAlteration(entity, ops)])
    assert [o.error for o in outcomes] == [ErrorCode.INVALID_REQUEST] and records == []
    assert message in (outcomes[0].message or "")


def test_each_entity_is_answered_on_its_own() -> None:
    outcomes, records = alter_quotas(MetadataImage(), [
        QuotaAlteration(ALICE, (QuotaOp("producer_byte_rate", 100),)),
        QuotaAlteration((("user", "bob"),), (QuotaOp("producer_byte_rate", -1),)),
        QuotaAlteration(DEFAULT_USER, (QuotaOp("consumer_byte_rate", 100),)),
    ])
    assert [o.error for o in outcomes] == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST, ErrorCode.NONE]
    assert {r.entity for r in records} == {ALICE, DEFAULT_USER}


def test_the_describe_filter_matches_exact_default_and_any_strictly_or_not() -> None:
    image = applied(MetadataImage(),
                    QuotaAlteration(ALICE, (QuotaOp("producer_byte_rate", 1),)),
                    QuotaAlteration(DEFAULT_USER, (QuotaOp("producer_byte_rate", 2),)),
                    QuotaAlteration(ALICE_APP, (QuotaOp("producer_byte_rate", 3),)),
                    QuotaAlteration((("client-id", None),), (QuotaOp("producer_byte_rate", 4),)))

    def found(*components: QuotaFilter, strict: bool = False) -> set[tuple[tuple[str, str | None], ...]]:
        return {entity for entity, _values in describe_quotas(image, components, strict)}

    assert found(QuotaFilter("user", 0, "alice")) == {ALICE, ALICE_APP}
    assert found(QuotaFilter("user", 0, "alice"), strict=True) == {ALICE}
    assert found(QuotaFilter("user", 1, None)) == {DEFAULT_USER}
    assert found(QuotaFilter("client-id", 2, None)) == {ALICE_APP, (("client-id", None),)}
    assert found(QuotaFilter("user", 2, None), QuotaFilter("client-id", 0, "app")) == {ALICE_APP}
    assert len(found()) == 4 and found(strict=True) == set()


@pytest.mark.parametrize(("components", "code"), [
    ([QuotaFilter("", 2, None)], ErrorCode.INVALID_REQUEST),
    ([QuotaFilter("user", 0, None)], ErrorCode.INVALID_REQUEST),
    ([QuotaFilter("user", 1, "x")], ErrorCode.INVALID_REQUEST),
    ([QuotaFilter("user", 2, "x")], ErrorCode.INVALID_REQUEST),
    ([QuotaFilter("user", 2, None), QuotaFilter("user", 1, None)], ErrorCode.INVALID_REQUEST),
    ([QuotaFilter("ip", 2, None), QuotaFilter("user", 2, None)], ErrorCode.INVALID_REQUEST),
    ([QuotaFilter("topic", 2, None)], ErrorCode.UNSUPPORTED_VERSION),
    ([QuotaFilter("user", 9, None)], ErrorCode.INVALID_REQUEST),
])
def test_bad_filters_are_refused(components, code) -> None:
    with pytest.raises(QuotaFilterError) as caught:
        describe_quotas(MetadataImage(), components, False)
    assert caught.value.code == code


def test_quota_records_survive_json_and_snapshots() -> None:
    record = ClientQuotaRecord(ALICE_APP, "producer_byte_rate", 5242880.0)
    assert from_json(to_json(record)) == record
    assert from_json(to_json(ClientQuotaRecord(DEFAULT_USER, "consumer_byte_rate", None))).entity == DEFAULT_USER
    image = applied(MetadataImage(), QuotaAlteration(ALICE_APP, (QuotaOp("producer_byte_rate", 5242880),)),
                    QuotaAlteration(DEFAULT_USER, (QuotaOp("request_percentage", 0.5),)))
    rebuilt = MetadataImage().apply(image_to_records(image))
    assert rebuilt.client_quotas == image.client_quotas
