"""Metadata snapshots: a ``MetadataImage`` written back as the records that rebuild it.

A snapshot of the metadata log (KRaft's ``<end offset>-<epoch>.checkpoint``) holds the image at
some log offset, so the entries below it can be deleted and a lagging or restarted node starts
from it. As in Kafka, a snapshot is a list of ordinary metadata records: applied to an empty
image they give an image equal to the original one, and records applied after them give the same
results as on a node that replayed the whole log.

Two facts of the image are not the plain result of its records and are carried explicitly:

* broker epochs are the offsets of the brokers' registrations, so each ``RegisterBrokerRecord``
  of a snapshot sets ``broker_epoch``;
* the image offset (which the next registration's epoch derives from) is restored by a closing
  ``MetadataOffsetRecord``.

Records come in the image's own iteration order (brokers, topics, partitions, configs), so the
rebuilt image also iterates alike.
"""

from __future__ import annotations

from .image import MetadataImage
from .records import (
    ClientQuotaRecord,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataOffsetRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
)

# ProducerIdsRecord names the broker that asked for the block; a snapshot keeps only the result.
NO_BROKER = -1


def image_to_records(image: MetadataImage) -> list[Record]:
    """The records that rebuild ``image`` from ``MetadataImage(image.cluster_id)``."""
    records: list[Record] = []
    for broker in image.brokers.values():
        records.append(RegisterBrokerRecord(
            broker.broker_id, broker.endpoints, broker.rack, broker.fenced, broker.incarnation_id,
            broker_epoch=broker.epoch))
    for topic in image.topics.values():
        records.append(TopicRecord(topic.name, topic.topic_id))
        for part in topic.partitions.values():
            records.append(PartitionRecord(
                topic.topic_id, part.partition, part.replicas, part.isr, part.leader, part.leader_epoch,
                part.partition_epoch, part.adding_replicas, part.removing_replicas))
    # After the topics: removing a topic drops its configs, creating one does not touch them.
    for (resource_type, resource_name), entries in image.configs.items():
        for name, value in entries.items():
            records.append(ConfigRecord(resource_type, resource_name, name, value))
    if image.next_producer_id:
        records.append(ProducerIdsRecord(NO_BROKER, image.next_producer_id))
    records.extend(FeatureLevelRecord(name, level) for name, level in sorted(image.features.items()))
    records.extend(credential for _key, credential in sorted(image.scram.items()))
    records.extend(image.acls.values())
    records.extend(ClientQuotaRecord(entity, key, value)
                   for entity, values in image.client_quotas.items() for key, value in values.items())
    records.append(MetadataOffsetRecord(image.offset))
    return records


__all__ = ["image_to_records"]
