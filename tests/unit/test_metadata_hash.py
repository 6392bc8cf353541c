"""The subscribed topics' metadata hash (KIP-1101) that group epoch records carry."""

from __future__ import annotations

import uuid

import pytest
from riverlog.coordinator.consumer_records import TopicMetadata
from riverlog.coordinator.metadata_hash import topics_hash

pytestmark = pytest.mark.unit

A = TopicMetadata(uuid.UUID(int=1), "a", 2, (("r1", "r2"), ("r2",)))
B = TopicMetadata(uuid.UUID(int=2), "b", 1)


def test_no_topics_hash_to_zero_and_any_topic_to_something_else() -> None:
    assert topics_hash([]) == 0
    assert topics_hash([A]) != 0 and topics_hash([B]) != 0


def test_the_order_of_topics_and_of_a_partitions_racks_does_not_matter() -> None:
    assert topics_hash([A, B]) == topics_hash([B, A])
    swapped = TopicMetadata(A.topic_id, A.name, 2, (("r2", "r1"), ("r2",)))
    assert topics_hash([swapped]) == topics_hash([A])
    # No rack information and an empty rack list per partition are the same metadata.
    assert topics_hash([B]) == topics_hash([TopicMetadata(B.topic_id, B.name, 1, ((),))])


@pytest.mark.parametrize("changed", [
    TopicMetadata(uuid.UUID(int=3), "a", 2, (("r1", "r2"), ("r2",))),  # recreated: a new id
    TopicMetadata(A.topic_id, "c", 2, (("r1", "r2"), ("r2",))),  # renamed
    TopicMetadata(A.topic_id, "a", 3, (("r1", "r2"), ("r2",))),  # a partition added
    TopicMetadata(A.topic_id, "a", 2, (("r1", "r2"), ("r3",))),  # a replica on another rack
], ids=["id", "name", "partitions", "racks"])
def test_each_kind_of_metadata_change_changes_the_hash(changed: TopicMetadata) -> None:
    assert topics_hash([changed, B]) != topics_hash([A, B])
