"""Which ``__consumer_offsets`` partition (and so which broker) coordinates a group.

Kafka hashes the group id with Java's ``String.hashCode`` and takes it modulo the partition
count of the offsets topic; the leader of that partition is the group's coordinator. Matching
the hash exactly means a group lands on the same partition as it would on Kafka, so data
written by one can be read by the other.
"""

from __future__ import annotations

from ..controller.topic_names import GROUP_METADATA_TOPIC

__all__ = ["GROUP_METADATA_TOPIC", "java_string_hashcode", "kafka_abs", "partition_for"]

_INT32_MIN = -(1 << 31)


def java_string_hashcode(value: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units,
    in wrapping 32-bit signed arithmetic."""
    h = 0
    data = value.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: like ``Math.abs`` except that ``Integer.MIN_VALUE`` maps to 0
    (``Math.abs`` would leave it negative)."""
    return 0 if n == _INT32_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hashcode(group_id)) % num_partitions
