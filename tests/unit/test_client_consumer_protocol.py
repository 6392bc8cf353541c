"""The embedded consumer protocol (subscriptions and assignments) of ``riverlog.client``, checked
against aiokafka's independent implementation of the same structures."""

from __future__ import annotations

import pytest
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from riverlog.client.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from riverlog.protocol.primitives import DecodeError

pytestmark = pytest.mark.unit


def test_version_0_bytes_match_aiokafka() -> None:
    assert encode_subscription(["a", "b"], user_data=b"ud") == ConsumerProtocolMemberMetadata(
        0, ["a", "b"], b"ud").encode()
    assert encode_assignment({"a": [0, 1], "b": [2]}, user_data=b"") == ConsumerProtocolMemberAssignment(
        0, [("a", [0, 1]), ("b", [2])], b"").encode()
    theirs = ConsumerProtocolMemberAssignment(0, [("orders", [3, 1])], None).encode()
    assert decode_assignment(theirs).topic_partitions() == [("orders", 1), ("orders", 3)]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_round_trips_in_every_version(version: int) -> None:
    data = encode_subscription(["t1", "t2"], user_data=b"\x00\x01", owned_partitions={"t1": [0, 2]},
                               generation_id=7, rack_id="r1", version=version)
    sub = decode_subscription(data)
    assert (sub.version, sub.topics, sub.user_data) == (version, ("t1", "t2"), b"\x00\x01")
    assert sub.owned_partitions == ({"t1": (0, 2)} if version >= 1 else {})
    assert sub.generation_id == (7 if version >= 2 else -1)
    assert sub.rack_id == ("r1" if version >= 3 else None)


def test_newer_versions_decode_with_trailing_fields_ignored() -> None:
    # A version-4 subscription with a field we do not know yet after the version-3 ones.
    data = bytearray(encode_subscription(["t"], version=3)) + b"\x00\x00\x00\x2a"
    data[0:2] = b"\x00\x04"
    assert decode_subscription(bytes(data)).topics == ("t",)


def test_empty_assignment_and_garbage() -> None:
    assert decode_assignment(b"").partitions == {}
    for garbage in (b"\x00", b"\x00\x00\x7f\xff\xff\xff", b"\xff\xff\x00\x00\x00\x00"):
        with pytest.raises(DecodeError):
            decode_assignment(garbage)
    with pytest.raises(DecodeError):
        decode_subscription(b"\x00\x00\x00\x00\x00\x01\x00\x05ab")
