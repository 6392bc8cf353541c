"""What a broker needs from the metadata controller: one small interface, two implementations.

``QuorumController`` (``quorum/controller.py``) implements it on every node, a lone broker
included: ``image`` and ``subscribe`` come from the node's own replica of the Raft metadata log,
and the ``async`` methods are decided by the active controller (forwarded to it with Riverlog's
controller call where Kafka has BrokerRegistration, BrokerHeartbeat, AlterPartition ... RPCs),
each returning once its records are committed *and* applied to this node's image, so callers may
read ``image`` right after. ``LocalController`` (``local.py``) implements it in one process, for
tests whose brokers share one controller (records fsynced to a local file).

Decisions are the pure functions of ``topic_ops``, ``partition_ops``, ``reassignment``,
``leader_balance``, ``scram`` and ``acls``; an implementation only makes their records durable, orders them, and
applies them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..protocol.errors import ErrorCode
from ..security.acl import AclBinding, AclFilter
from .acls import AclCreation, AclDeletion
from .client_quotas import QuotaAlteration, QuotaOutcome
from .features import FeatureOutcome, FeatureUpdate
from .image import MetadataImage
from .partition_ops import AlterPartitionOutcome, AlterPartitionRequest, ElectionOutcome
from .reassignment import OngoingReassignment, ReassignmentItem, ReassignmentResult
from .records import Endpoint
from .scram import ScramDeletion, ScramUpsertion, UserOutcome
from .topic_ops import NewTopic, Outcome

# Called with (old image, new image) after records are applied, on the event loop thread. It
# must not block and must not await the controller (it runs inside a commit).
ImageListener = Callable[[MetadataImage, MetadataImage], None]
Unsubscribe = Callable[[], None]


@dataclass(frozen=True)
class HeartbeatResult:
    error: ErrorCode = ErrorCode.NONE  # STALE_BROKER_EPOCH: the registration is not this process's
    fenced: bool = True
    in_controlled_shutdown: bool = False


class ControllerApi(Protocol):
    @property
    def image(self) -> MetadataImage:
        """The latest metadata image this broker has applied."""
        ...

    @property
    def controller_id(self) -> int:
        """The broker id clients should send controller requests to (Metadata, DescribeCluster)."""
        ...

    def subscribe(self, listener: ImageListener) -> Unsubscribe:
        ...

    # Broker lifecycle ----------------------------------------------------------------------

    async def register_broker(
        self, broker_id: int, incarnation_id: str, endpoints: Sequence[Endpoint], rack: str | None
    ) -> int:
        """Register a starting broker process (fenced); returns its broker epoch."""
        ...

    async def heartbeat(
        self, broker_id: int, broker_epoch: int, *, want_fence: bool = False, want_shutdown: bool = False
    ) -> HeartbeatResult:
        """Liveness; ``want_fence=False`` asks to be unfenced (the broker is ready to serve),
        ``want_shutdown=True`` is a controlled shutdown: leadership moves away and the broker is
        fenced before the call returns."""
        ...

    async def fence_broker(self, broker_id: int) -> None:
        """Fence a broker that is gone (missed heartbeats; tests call it directly after a crash)."""
        ...

    # Partitions ----------------------------------------------------------------------------

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, requests: Sequence[AlterPartitionRequest]
    ) -> AlterPartitionOutcome:
        """ISR changes proposed by partition leaders (see ``partition_ops.alter_partition``)."""
        ...

    async def elect_leaders(self, items: Sequence[tuple[str, int]], election_type: int) -> list[ElectionOutcome]:
        ...

    async def alter_partition_reassignments(
        self, items: Sequence[ReassignmentItem], *, allow_replication_factor_change: bool = True
    ) -> list[ReassignmentResult]:
        """Start, change or cancel (target None) reassignments (see ``reassignment``)."""
        ...

    async def list_partition_reassignments(
        self, wanted: Sequence[tuple[str, Sequence[int]]] | None = None
    ) -> list[OngoingReassignment]:
        """Reassignments in progress, all or among ``wanted`` (topic, partitions)."""
        ...

    async def balance_leaders(self, imbalance_percentage: int) -> int:
        """One automatic preferred-leader rebalance pass (see ``leader_balance``)."""
        ...

    # Admin ---------------------------------------------------------------------------------

    async def create_topics(
        self, requests: Sequence[NewTopic], *, validate_only: bool, default_partitions: int,
        default_replication: int,
    ) -> list[Outcome]:
        ...

    async def delete_topics(self, items: Sequence[tuple[str | None, uuid.UUID | None]]) -> list[Outcome]:
        ...

    async def create_partitions(
        self, items: Sequence[tuple[str, int, Sequence[Sequence[int]] | None]], *, validate_only: bool
    ) -> list[Outcome]:
        ...

    async def alter_topic_configs(
        self, name: str, values: Mapping[str, str | None], *, replace_all: bool, validate_only: bool
    ) -> Outcome:
        ...

    async def alter_group_configs(
        self, name: str, values: Mapping[str, str | None], *, replace_all: bool, validate_only: bool,
        limits: Mapping[str, str],
    ) -> Outcome:
        """A group's configs (see ``group_config_ops``), checked against ``limits``."""
        ...

    async def allocate_producer_id(self, broker_id: int) -> int:
        ...

    async def update_features(self, updates: Sequence[FeatureUpdate], *, validate_only: bool) -> list[FeatureOutcome]:
        """UpdateFeatures: all updates applied, or none (see ``features``)."""
        ...

    async def alter_user_scram_credentials(self, deletions: Sequence[ScramDeletion],
                                           upsertions: Sequence[ScramUpsertion]) -> list[UserOutcome]:
        """AlterUserScramCredentials: every accepted change committed together (see ``scram``)."""
        ...

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[AclCreation]:
        """CreateAcls: one outcome per binding; the new ones committed together (see ``acls``)."""
        ...

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[AclDeletion]:
        """DeleteAcls: per filter, the bindings removed; all removals committed together."""
        ...

    async def alter_client_quotas(self, alterations: Sequence[QuotaAlteration], *,
                                  validate_only: bool) -> list[QuotaOutcome]:
        """AlterClientQuotas: every accepted entity's changes committed together (see
        ``client_quotas``)."""
        ...
