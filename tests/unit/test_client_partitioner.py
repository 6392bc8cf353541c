"""The client's murmur2 and default partitioner agree with Kafka's.

Expected hashes are the ones Kafka's own unit tests assert for ``Utils.murmur2``; random inputs
are compared with kafka-python's independent implementation (which returns the same 32 bits as
an unsigned number).
"""

from __future__ import annotations

import random

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2
from riverlog.client.partitioner import DefaultPartitioner, murmur2, partition_for_key, to_positive

pytestmark = pytest.mark.unit

# (input, Utils.murmur2 result) from Apache Kafka's UtilsTest.
KAFKA_KNOWN = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "expected"), KAFKA_KNOWN)
def test_murmur2_matches_kafka_known_values(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_matches_kafka_python_on_random_inputs() -> None:
    rng = random.Random(1234)
    for length in range(0, 70):  # every tail length, several whole-word counts
        for _ in range(20):
            data = bytes(rng.randrange(256) for _ in range(length))
            assert murmur2(data) & 0xFFFF_FFFF == kafka_python_murmur2(bytearray(data)), data


def test_murmur2_result_is_a_signed_int32() -> None:
    values = [murmur2(str(i).encode()) for i in range(2000)]
    assert all(-(2**31) <= v < 2**31 for v in values)
    assert any(v < 0 for v in values) and any(v > 0 for v in values)


def test_to_positive_clears_the_sign_bit_like_kafka() -> None:
    assert to_positive(-1) == 0x7FFF_FFFF
    assert to_positive(-(2**31)) == 0  # where abs() would overflow in Java
    assert to_positive(5) == 5


def test_partition_for_key_is_kafkas_formula() -> None:
    for data, expected in KAFKA_KNOWN:
        for n in (1, 3, 7, 64):
            assert partition_for_key(data, n) == (expected & 0x7FFF_FFFF) % n


def test_keyless_records_go_round_robin_per_topic() -> None:
    p = DefaultPartitioner()
    assert [p.partition("a", None, 3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert p.partition("b", None, 3) == 0  # each topic has its own rotation
    assert p.partition("a", b"k", 3) == partition_for_key(b"k", 3)


def test_zero_partitions_is_an_error() -> None:
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)
