"""Choosing a partition for a record the way Kafka's default partitioner does.

Keyed records go to ``toPositive(murmur2(key)) % numPartitions`` so that a key lands on the same
partition whichever Kafka-compatible client produced it. Keyless records are spread round-robin.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

_MASK32 = 0xFFFF_FFFF
# MurmurHash2 (32-bit) constants, and the seed Kafka's implementation uses.
_M = 0x5BD1_E995
_R = 24
_SEED = 0x9747_B28C


def murmur2(data: bytes) -> int:
    """32-bit MurmurHash2 of ``data`` as Kafka computes it, returned as a signed int32.

    Kafka reads the input in little-endian 4-byte words, mixes the 1-3 trailing bytes in at the
    end, and works in Java ints; we emulate the 32-bit wraparound with masks.
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    body_end = length - length % 4
    for i in range(0, body_end, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    tail = length % 4
    if tail:
        # The switch in the reference implementation falls through from 3 to 2 to 1.
        if tail == 3:
            h ^= data[body_end + 2] << 16
        if tail >= 2:
            h ^= data[body_end + 1] << 8
        h ^= data[body_end]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x8000_0000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``, which fails on MIN_VALUE)."""
    return n & 0x7FFF_FFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    if num_partitions <= 0:
        raise ValueError("a topic has at least one partition")
    return to_positive(murmur2(key)) % num_partitions


class DefaultPartitioner:
    """murmur2 for keyed records; a per-topic round-robin for records without a key."""

    def __init__(self) -> None:
        self._counters: dict[str, Iterator[int]] = {}

    def partition(self, topic: str, key: bytes | None, num_partitions: int) -> int:
        if key is not None:
            return partition_for_key(key, num_partitions)
        counter = self._counters.setdefault(topic, itertools.count())
        return next(counter) % num_partitions
