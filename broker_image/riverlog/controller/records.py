"""Metadata records: the facts the controller log holds, applied in order to build the image.

The same records will be replicated by the Raft quorum of the cluster; for a single broker the
local controller writes them to a file. Each record is a frozen dataclass with a JSON form.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Endpoint:
    listener: str
    host: str
    port: int


@dataclass(frozen=True)
class RegisterBrokerRecord:
    """A broker (re)registered. Its broker epoch is this record's offset in the metadata log, so
    every start of a broker process (a new ``incarnation_id``) gets a new, larger epoch; requests
    carrying an older epoch (AlterPartition, heartbeats) come from a previous life and are refused.
    A registration starts fenced: the broker is unfenced once it is ready to serve.

    ``broker_epoch`` is -1 in the log (the epoch is the offset); a snapshot, which rebuilds the
    image with records at other offsets, sets it to keep the epoch the broker got originally."""

    TYPE: ClassVar[str] = "register_broker"
    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    fenced: bool = False
    incarnation_id: str = ""
    broker_epoch: int = -1


@dataclass(frozen=True)
class BrokerRegistrationChangeRecord:
    """Fence or unfence the registration of ``broker_id`` made with ``broker_epoch`` (a change
    aimed at an older registration is ignored, as Kafka's record of the same name)."""

    TYPE: ClassVar[str] = "broker_registration_change"
    broker_id: int
    broker_epoch: int
    fenced: bool


@dataclass(frozen=True)
class TopicRecord:
    TYPE: ClassVar[str] = "topic"
    name: str
    topic_id: uuid.UUID


@dataclass(frozen=True)
class PartitionRecord:
    TYPE: ClassVar[str] = "partition"
    topic_id: uuid.UUID
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    # An ongoing reassignment (KIP-455): replicas being added / removed; both empty otherwise.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class PartitionChangeRecord:
    """A change of leader, ISR, replicas or reassignment state; None fields are unchanged (an
    empty ``adding_replicas``/``removing_replicas`` clears them). Setting ``leader``, even to the
    current leader, bumps the leader epoch (as Kafka's record does: a reassignment that removes
    replicas bumps it without a leader change); any change bumps the partition epoch."""

    TYPE: ClassVar[str] = "partition_change"
    topic_id: uuid.UUID
    partition: int
    leader: int | None = None
    isr: tuple[int, ...] | None = None
    replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None


@dataclass(frozen=True)
class ConfigRecord:
    """A dynamic config of a resource (type 2 = topic, 4 = broker); value None removes it."""

    TYPE: ClassVar[str] = "config"
    resource_type: int
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True)
class RemoveTopicRecord:
    TYPE: ClassVar[str] = "remove_topic"
    topic_id: uuid.UUID


@dataclass(frozen=True)
class ProducerIdsRecord:
    """The controller handed out producer ids below ``next_producer_id``."""

    TYPE: ClassVar[str] = "producer_ids"
    broker_id: int
    next_producer_id: int


@dataclass(frozen=True)
class FeatureLevelRecord:
    """A feature finalized at ``level`` (Kafka's FeatureLevelRecord; level 0 removes it)."""

    TYPE: ClassVar[str] = "feature_level"
    name: str
    level: int


@dataclass(frozen=True)
class UserScramCredentialRecord:
    """A user's SCRAM credential for one mechanism (Kafka's UserScramCredentialRecord): salt,
    stored key and server key in base64, never the password. Replaces an earlier one."""

    TYPE: ClassVar[str] = "user_scram_credential"
    name: str
    mechanism: str  # SCRAM-SHA-256 or SCRAM-SHA-512
    salt: str
    stored_key: str
    server_key: str
    iterations: int


@dataclass(frozen=True)
class RemoveUserScramCredentialRecord:
    TYPE: ClassVar[str] = "remove_user_scram_credential"
    name: str
    mechanism: str


# A client quota entity: (entity type, name) pairs sorted by type, the type ``user`` or ``client-id``;
# a None name is the type's default entity (``<default>`` in kafka-configs).
QuotaEntity = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class ClientQuotaRecord:
    """One quota of one entity set (``value``) or removed (None), as Kafka's ClientQuotaRecord
    (``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
    ``controller_mutation_rate``); controller/client_quotas.py decides them."""

    TYPE: ClassVar[str] = "client_quota"
    entity: QuotaEntity
    key: str
    value: float | None


@dataclass(frozen=True)
class AccessControlEntryRecord:
    """An ACL binding (Kafka's AccessControlEntryRecord; codes as in ``security/acl.py``), named
    by ``id`` so a later RemoveAccessControlEntryRecord can remove exactly it."""

    TYPE: ClassVar[str] = "access_control_entry"
    id: uuid.UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True)
class RemoveAccessControlEntryRecord:
    TYPE: ClassVar[str] = "remove_access_control_entry"
    id: uuid.UUID


@dataclass(frozen=True)
class MetadataOffsetRecord:
    """Only in snapshots, as their last record: this record stands at metadata offset ``offset``
    (the offset of the image the snapshot was taken from). Records applied after the snapshot
    then get the offsets, hence the broker epochs, they get on a node that replayed the whole log."""

    TYPE: ClassVar[str] = "metadata_offset"
    offset: int


Record = (
    RegisterBrokerRecord
    | BrokerRegistrationChangeRecord
    | TopicRecord
    | PartitionRecord
    | PartitionChangeRecord
    | ConfigRecord
    | RemoveTopicRecord
    | ProducerIdsRecord
    | FeatureLevelRecord
    | UserScramCredentialRecord
    | RemoveUserScramCredentialRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | ClientQuotaRecord
    | MetadataOffsetRecord
)

_TYPES: dict[str, Any] = {
    cls.TYPE: cls
    for cls in (
        RegisterBrokerRecord,
        BrokerRegistrationChangeRecord,
        TopicRecord,
        PartitionRecord,
        PartitionChangeRecord,
        ConfigRecord,
        RemoveTopicRecord,
        ProducerIdsRecord,
        FeatureLevelRecord,
        UserScramCredentialRecord,
        RemoveUserScramCredentialRecord,
        AccessControlEntryRecord,
        RemoveAccessControlEntryRecord,
        ClientQuotaRecord,
        MetadataOffsetRecord,
    )
}


def to_json(record: Record) -> dict[str, Any]:
    data = asdict(record)
    for key, value in data.items():
        if isinstance(value, uuid.UUID):
            data[key] = str(value)
    data["type"] = record.TYPE
    return data


def from_json(data: dict[str, Any]) -> Record:
    data = dict(data)
    cls = _TYPES[data.pop("type")]
    for key in ("topic_id", "id"):
        if key in data:
            data[key] = uuid.UUID(data[key])
    for key in ("replicas", "isr", "adding_replicas", "removing_replicas"):
        if data.get(key) is not None:
            data[key] = tuple(data[key])
    if cls is ClientQuotaRecord:
        data["entity"] = tuple((kind, name) for kind, name in data["entity"])
    if cls is RegisterBrokerRecord:
        data["endpoints"] = tuple(Endpoint(**e) for e in data["endpoints"])
    record: Record = cls(**data)
    return record


__all__ = [
    "AccessControlEntryRecord",
    "BrokerRegistrationChangeRecord",
    "ClientQuotaRecord",
    "ConfigRecord",
    "Endpoint",
    "FeatureLevelRecord",
    "MetadataOffsetRecord",
    "PartitionChangeRecord",
    "PartitionRecord",
    "ProducerIdsRecord",
    "QuotaEntity",
    "Record",
    "RegisterBrokerRecord",
    "RemoveAccessControlEntryRecord",
    "RemoveTopicRecord",
    "RemoveUserScramCredentialRecord",
    "TopicRecord",
    "UserScramCredentialRecord",
    "field",
    "from_json",
    "to_json",
]
