"""The JSON forms of the metadata quorum: log entries and forwarded controller calls."""

from __future__ import annotations

import uuid

import pytest
from riverlog.controller.api import HeartbeatResult
from riverlog.controller.client_quotas import QuotaAlteration, QuotaOp, QuotaOutcome
from riverlog.controller.partition_ops import AlterPartitionOutcome, AlterPartitionRequest, AlterPartitionResult
from riverlog.controller.quorum import codec
from riverlog.controller.records import (
    ClientQuotaRecord,
    ConfigRecord,
    Endpoint,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from riverlog.controller.topic_ops import NewTopic, Outcome
from riverlog.protocol.errors import ErrorCode

pytestmark = pytest.mark.unit

TOPIC_ID = uuid.UUID("5f0c6a0e-9d43-4a8e-9d0b-6f3b2f0e4a11")


def test_records_round_trip_as_one_entry() -> None:
    records = [
        RegisterBrokerRecord(1, (Endpoint("PLAINTEXT", "127.0.0.1", 9092),), "rack-a", True, "inc-1"),
        TopicRecord("orders", TOPIC_ID),
        PartitionRecord(TOPIC_ID, 0, (1, 2, 3), (1, 2), 1, 0, 0),
        ConfigRecord(2, "orders", "cleanup.policy", "compact"),
    ]
    assert codec.decode_records(codec.encode_records(records)) == records


def test_call_values_keep_their_types() -> None:
    value = {
        "args": (
            [NewTopic("orders", 3, 2, {0: [1, 2], 1: [2, 3]}, {"retention.ms": "1000", "x": None})],
            (1, "inc", (Endpoint("PLAINTEXT", "h", 1),), None),
            [AlterPartitionRequest(TOPIC_ID, 0, 4, 9, (1, 2), (10, 11))],
        ),
        "kwargs": {"validate_only": False, "n": 3},
    }
    back = codec.from_wire(codec.to_wire(value))
    assert back == value
    new_topic = back["args"][0][0]
    assert isinstance(new_topic, NewTopic) and new_topic.assignments == {0: [1, 2], 1: [2, 3]}
    assert isinstance(back["args"][1], tuple) and isinstance(back["args"][1][2][0], Endpoint)


def test_results_keep_enums_uuids_and_records() -> None:
    outcome = Outcome(ErrorCode.TOPIC_ALREADY_EXISTS, "exists", [TopicRecord("t", TOPIC_ID)], TOPIC_ID, 3, 1)
    back = codec.from_wire(codec.to_wire(outcome))
    assert back == outcome
    assert back.error is ErrorCode.TOPIC_ALREADY_EXISTS and back.error.name == "TOPIC_ALREADY_EXISTS"
    hb = codec.from_wire(codec.to_wire(HeartbeatResult(ErrorCode.NONE, False, False)))
    assert hb == HeartbeatResult(ErrorCode.NONE, False, False)
    alter = AlterPartitionOutcome(ErrorCode.NONE, [AlterPartitionResult(TOPIC_ID, 0, isr=(1, 2))], [])
    assert codec.from_wire(codec.to_wire(alter)) == alter


def test_forwarded_quota_alterations_keep_default_entities_and_floats() -> None:
    alteration = QuotaAlteration((("user", None), ("client-id", "app")),
                                 (QuotaOp("producer_byte_rate", 5242880.0), QuotaOp("request_percentage", 0, True)))
    back = codec.from_wire(codec.to_wire(([alteration], {"validate_only": True})))
    assert back == ([alteration], {"validate_only": True})
    outcome = QuotaOutcome((("user", None),), ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    assert codec.from_wire(codec.to_wire([outcome])) == [outcome]
    record = ClientQuotaRecord((("client-id", None), ("user", "alice")), "consumer_byte_rate", None)
    assert codec.decode_records(codec.encode_records([record])) == [record]


def test_unregistered_classes_are_refused_both_ways() -> None:
    class Sneaky:
        pass

    with pytest.raises(TypeError):
        codec.to_wire(Sneaky())
    with pytest.raises(KeyError):
        codec.from_wire('{"$dc": "Popen", "f": {}}')
