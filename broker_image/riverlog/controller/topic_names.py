"""Names of Kafka's special topics, in one place below the image and the decisions.

Internal topics are Kafka's set (its ``Topic.INTERNAL_TOPICS``), whether or not Riverlog uses
them yet: clients may not produce to them, and Metadata marks only them ``is_internal``. Clients
may still create, delete and add partitions to them, as Kafka 4's broker lets them (only
``kafka-topics.sh`` refuses some of that, on the client side).
"""

from __future__ import annotations

GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})

# The metadata log: never a topic of the image, and its directory name is the one a topic of this
# name would get, so no request may create it.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
