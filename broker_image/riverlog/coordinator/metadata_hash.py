"""The metadata hash of a group's subscribed topics (KIP-1101, Kafka 4.1+).

A group's epoch moves when the metadata of the topics its members subscribe to changes (a topic
created or deleted, partitions added, replicas moved to other racks). Kafka keeps a hash of that
metadata in the group's epoch record instead of the metadata itself, so a coordinator that loads
the group compares the hash with the cluster's metadata and bumps the epoch only if something
changed while nobody led the group. Riverlog does the same; the hash is its own (BLAKE2b over a
canonical encoding), not Kafka's XXH3 one, since only Riverlog's coordinators read it back.
0 means "no hash" in Kafka's records, and is what no subscribed topic hashes to.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable

from .consumer_records import TopicMetadata


def topics_hash(topics: Iterable[TopicMetadata]) -> int:
    """A signed 64-bit hash of the topics' ids, names, partition counts and per-partition racks,
    independent of their order; 0 for no topics."""
    digest = hashlib.blake2b(digest_size=8)
    count = 0
    for topic in sorted(topics, key=lambda t: t.name):
        count += 1
        name = topic.name.encode()
        digest.update(topic.topic_id.bytes)
        digest.update(struct.pack(">HI", len(name), topic.num_partitions))
        digest.update(name)
        # Racks as a set per partition (the replicas' order is not what a rack-aware assignor looks
        # at); a partition without rack information hashes as one with no racks.
        for index in range(topic.num_partitions):
            racks = topic.racks[index] if index < len(topic.racks) else ()
            encoded = [r.encode() for r in sorted(set(racks))]
            digest.update(struct.pack(">H", len(encoded)))
            for rack in encoded:
                digest.update(struct.pack(">H", len(rack)))
                digest.update(rack)
    if count == 0:
        return 0
    value = int.from_bytes(digest.digest(), "big", signed=True)
    return value or 1  # 0 is "no hash"
