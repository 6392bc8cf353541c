"""The metadata image: an immutable snapshot of cluster metadata that brokers serve from.

Every broker holds the latest image and swaps it atomically when new records commit, so a
request handler always sees one consistent view (topics, partitions, leaders, configs).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from .records import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    Endpoint,
    FeatureLevelRecord,
    MetadataOffsetRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    QuotaEntity,
    Record,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UserScramCredentialRecord,
)
from .topic_names import INTERNAL_TOPICS

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


@dataclass(frozen=True)
class BrokerImage:
    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    fenced: bool
    epoch: int = -1  # offset of its RegisterBrokerRecord in the metadata log
    incarnation_id: str = ""

    def endpoint(self, listener: str | None = None) -> Endpoint | None:
        for ep in self.endpoints:
            if listener is None or ep.listener == listener:
                return ep
        return None


@dataclass(frozen=True)
class PartitionImage:
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        """Whether a reassignment is in progress (``replicas`` is then target + removing)."""
        return bool(self.adding_replicas or self.removing_replicas)


@dataclass(frozen=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionImage] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS  # Kafka's set, not every name starting with "__"


@dataclass(frozen=True)
class MetadataImage:
    cluster_id: str = ""
    offset: int = -1  # index of the last applied record
    brokers: Mapping[int, BrokerImage] = field(default_factory=dict)
    topics: Mapping[str, TopicImage] = field(default_factory=dict)
    topic_ids: Mapping[uuid.UUID, str] = field(default_factory=dict)
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=dict)
    next_producer_id: int = 0
    # Finalized feature levels (FeatureLevelRecord); a feature never set has its default (see
    # ``controller/features.py``).
    features: Mapping[str, int] = field(default_factory=dict)
    # SCRAM credentials by (user, mechanism) (controller/scram.py).
    scram: Mapping[tuple[str, str], UserScramCredentialRecord] = field(default_factory=dict)
    # ACL bindings by id, in creation order (controller/acls.py, security/authorizer.py).
    acls: Mapping[uuid.UUID, AccessControlEntryRecord] = field(default_factory=dict)
    # Client quotas by entity, each its keys and values (controller/client_quotas.py); an entity
    # whose last quota is removed is dropped, as Kafka's image drops it.
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=dict)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        name = self.topic_ids.get(topic_id)
        return None if name is None else self.topics.get(name)

    def topic_configs(self, name: str) -> Mapping[str, str]:
        return self.configs.get((TOPIC_RESOURCE, name), {})

    def live_broker_ids(self) -> frozenset[int]:
        """Registered, unfenced brokers: the ones that may lead or join an ISR."""
        return frozenset(b.broker_id for b in self.brokers.values() if not b.fenced)

    def offline_partition_count(self) -> int:
        """Partitions without a live leader (Kafka's OfflinePartitionsCount)."""
        live = self.live_broker_ids()
        return sum(1 for topic in self.topics.values() for p in topic.partitions.values()
                   if p.leader < 0 or p.leader not in live)

    def apply(self, records: Iterable[Record]) -> MetadataImage:
        """A new image with ``records`` applied; ``self`` is unchanged."""
        brokers = dict(self.brokers)
        topics = dict(self.topics)
        topic_ids = dict(self.topic_ids)
        configs = {k: dict(v) for k, v in self.configs.items()}
        next_pid = self.next_producer_id
        features = dict(self.features)
        scram = dict(self.scram)
        acls = dict(self.acls)
        quotas = {entity: dict(values) for entity, values in self.client_quotas.items()}
        # Partition maps are copied only for topics a record touches.
        touched: dict[str, dict[int, PartitionImage]] = {}
        count = 0
        base = self.offset  # the n-th record applied here (from 1) stands at offset base + n

        def partitions_of(topic_id: uuid.UUID) -> tuple[str, dict[int, PartitionImage]] | None:
            name = topic_ids.get(topic_id)
            if name is None:
                return None
            if name not in touched:
                touched[name] = dict(topics[name].partitions)
            return name, touched[name]

        for record in records:
            count += 1
            if isinstance(record, RegisterBrokerRecord):
                epoch = record.broker_epoch if record.broker_epoch >= 0 else base + count
                brokers[record.broker_id] = BrokerImage(
                    record.broker_id, record.endpoints, record.rack, record.fenced, epoch,
                    record.incarnation_id,
                )
            elif isinstance(record, BrokerRegistrationChangeRecord):
                current = brokers.get(record.broker_id)
                if current is not None and record.broker_epoch in (current.epoch, -1):
                    brokers[record.broker_id] = replace(current, fenced=record.fenced)
            elif isinstance(record, TopicRecord):
                topics[record.name] = TopicImage(record.name, record.topic_id, {})
                topic_ids[record.topic_id] = record.name
                touched[record.name] = {}
            elif isinstance(record, PartitionRecord):
                found = partitions_of(record.topic_id)
                if found:
                    found[1][record.partition] = PartitionImage(
                        record.partition, record.replicas, record.isr, record.leader,
                        record.leader_epoch, record.partition_epoch, record.adding_replicas,
                        record.removing_replicas,
                    )
            elif isinstance(record, PartitionChangeRecord):
                found = partitions_of(record.topic_id)
                if found and record.partition in found[1]:
                    old = found[1][record.partition]
                    found[1][record.partition] = replace(
                        old,
                        leader=old.leader if record.leader is None else record.leader,
                        isr=old.isr if record.isr is None else record.isr,
                        replicas=old.replicas if record.replicas is None else record.replicas,
                        adding_replicas=old.adding_replicas if record.adding_replicas is None
                        else record.adding_replicas,
                        removing_replicas=old.removing_replicas if record.removing_replicas is None
                        else record.removing_replicas,
                        leader_epoch=old.leader_epoch + (0 if record.leader is None else 1),
                        partition_epoch=old.partition_epoch + 1,
                    )
            elif isinstance(record, ConfigRecord):
                key = (record.resource_type, record.resource_name)
                entries = configs.setdefault(key, {})
                if record.value is None:
                    entries.pop(record.name, None)
                else:
                    entries[record.name] = record.value
            elif isinstance(record, RemoveTopicRecord):
                name = topic_ids.pop(record.topic_id, None)
                if name is not None:
                    topics.pop(name, None)
                    touched.pop(name, None)
                    configs.pop((TOPIC_RESOURCE, name), None)
            elif isinstance(record, ProducerIdsRecord):
                next_pid = max(next_pid, record.next_producer_id)
            elif isinstance(record, FeatureLevelRecord):
                features[record.name] = record.level
            elif isinstance(record, UserScramCredentialRecord):
                scram[(record.name, record.mechanism)] = record
            elif isinstance(record, RemoveUserScramCredentialRecord):
                scram.pop((record.name, record.mechanism), None)
            elif isinstance(record, AccessControlEntryRecord):
                acls[record.id] = record
            elif isinstance(record, RemoveAccessControlEntryRecord):
                acls.pop(record.id, None)
            elif isinstance(record, ClientQuotaRecord):
                values = quotas.setdefault(record.entity, {})
                if record.value is None:
                    values.pop(record.key, None)
                else:
                    values[record.key] = record.value
            elif isinstance(record, MetadataOffsetRecord):
                base = record.offset - count

        for name, parts in touched.items():
            if name in topics:
                topics[name] = replace(topics[name], partitions=MappingProxyType(parts))
        return replace(
            self,
            offset=base + count,
            brokers=MappingProxyType(brokers),
            topics=MappingProxyType(topics),
            topic_ids=MappingProxyType(topic_ids),
            configs=MappingProxyType({k: MappingProxyType(v) for k, v in configs.items() if v}),
            next_producer_id=next_pid,
            features=MappingProxyType(features),
            scram=MappingProxyType(scram),
            acls=MappingProxyType(acls),
            client_quotas=MappingProxyType({e: MappingProxyType(v) for e, v in quotas.items() if v}),
        )
