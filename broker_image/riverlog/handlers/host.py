"""What a request handler may use of the node serving it: the whole of its view of the broker.

Handlers sit below the node that assembles them (``broker.py``, ``controller_node.py``) and
never import it: they are bound to a *host* that satisfies one of these protocols. That keeps the
layering one-way (the node wires handlers, handlers call the parts named here) and shows at a
glance what a new handler can reach: the metadata image, the controller's calls, the replica
manager, the group coordinator, configuration, metrics, and the quorum for its own RPCs. Time
comes from ``riverlog.clock``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..cluster.fetch_sessions import FetchSessionCache
    from ..cluster.partition import Partition
    from ..cluster.replica_manager import ReplicaManager
    from ..config import BrokerConfig
    from ..controller.api import ControllerApi
    from ..controller.image import MetadataImage
    from ..controller.quorum.controller import QuorumController
    from ..coordinator.runtime import GroupCoordinator
    from ..metrics import Metrics
    from ..security.access import AccessControl
    from ..server.dispatch import Dispatcher
    from ..share.coordinator import ShareCoordinator
    from ..share.manager import SharePartitionManager
    from ..share.sessions import ShareSessionCache
    from ..transactions.runtime import TransactionCoordinator


class QuorumHost(Protocol):
    """A node of the metadata quorum (a broker or a dedicated controller), for the quorum's RPCs."""

    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def quorum(self) -> QuorumController | None:
        """This node's replica of the metadata quorum; None where it runs without one (a broker
        sharing an in-process test controller answers the quorum's RPCs with errors)."""
        ...

    @property
    def dispatcher(self) -> Dispatcher:
        """The API table this node serves (ApiVersions answers from it)."""
        ...

    @property
    def access(self) -> AccessControl:
        """ACL checks (``authorizer.class.name``); allows everything when no authorizer is set."""
        ...


class BrokerHost(QuorumHost, Protocol):
    """A broker, for every client- and replica-facing API."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def image(self) -> MetadataImage:
        """The latest metadata image this broker has applied."""
        ...

    @property
    def controller(self) -> ControllerApi:
        """Where admin requests go; each call returns once its records are applied to ``image``."""
        ...

    @property
    def replicas(self) -> ReplicaManager: ...

    @property
    def fetch_sessions(self) -> FetchSessionCache:
        """Incremental fetch sessions (KIP-227) of this broker's consumers and followers."""
        ...

    @property
    def share_sessions(self) -> ShareSessionCache:
        """KIP-932 share sessions of the share consumers fetching from this broker."""
        ...

    @property
    def share_partitions(self) -> SharePartitionManager:
        """The share-partitions (in-flight record states per share group) of partitions led here."""
        ...

    @property
    def share_coordinator(self) -> ShareCoordinator:
        """The share coordinator (``__share_group_state`` partitions this broker leads)."""
        ...

    @property
    def coordinator(self) -> GroupCoordinator: ...

    @property
    def transactions(self) -> TransactionCoordinator:
        """The transaction coordinator (``__transaction_state`` partitions this broker leads)."""
        ...

    @property
    def metrics(self) -> Metrics: ...

    def flush_soon(self, partition: Partition) -> None:
        """fsync this partition's log off the event loop (``flush.messages`` was reached)."""
        ...
