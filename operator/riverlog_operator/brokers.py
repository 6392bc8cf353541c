"""What the operator asks the brokers, through Riverlog's own async admin client."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from riverlog.client.admin import AdminClient
from riverlog.client.errors import BrokerError, ClientError
from riverlog.protocol.errors import KafkaError
from riverlog.security.client_config import ClientSecurity

from .placement import TopicPartition
from .status import BrokerState

# Kept short: a reconcile should not hang on a dead cluster; the next one tries again.
CONNECT_TIMEOUT = 3.0
REQUEST_TIMEOUT = 10.0
OPERATION_TIMEOUT = 10.0

# Errors that mean "could not talk to the cluster" rather than "the cluster said no".
UNREACHABLE_ERRORS: tuple[type[BaseException], ...] = (ClientError, OSError, TimeoutError)


@dataclass(frozen=True)
class ClusterSnapshot:
    state: BrokerState
    assignments: dict[TopicPartition, list[int]]
    reassigning: frozenset[TopicPartition]


def admin_client(bootstrap: str, security: ClientSecurity | None = None) -> AdminClient:
    """The operator's admin client; ``security``: its own mutual-TLS credentials on a secured
    cluster (handlers/key_material.py)."""
    return AdminClient(bootstrap, client_id="riverlog-operator", connect_timeout=CONNECT_TIMEOUT,
                       request_timeout=REQUEST_TIMEOUT, operation_timeout=OPERATION_TIMEOUT, security=security)


async def snapshot(admin: AdminClient) -> ClusterSnapshot:
    description = await admin.describe_cluster()
    quorum = await admin.describe_quorum()
    topics = await admin.list_topics(include_internal=True)
    assignments: dict[TopicPartition, list[int]] = {}
    under_replicated = offline = 0
    for topic in topics:
        for p in topic.partitions:
            assignments[(topic.name, p.partition)] = list(p.replicas)
            if p.leader < 0:
                offline += 1
            if len(p.isr) < len(p.replicas):
                under_replicated += 1
    reassigning = frozenset(await admin.list_partition_reassignments())
    controller = quorum.leader_id if quorum is not None else description.controller_id
    state = BrokerState(tuple(b.node_id for b in description.brokers), controller, under_replicated, offline)
    return ClusterSnapshot(state, assignments, reassigning)


async def reassign(admin: AdminClient, plan: Mapping[TopicPartition, Sequence[int]]) -> list[str]:
    """Submit reassignments; the refusals as messages (an empty list: all accepted)."""
    if not plan:
        return []
    results = await admin.alter_partition_reassignments(plan)
    return [str(err) for err in results.values() if err is not None]


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, BrokerError):
        return str(exc)
    if isinstance(exc, KafkaError):
        return f"broker error: {exc}"
    return f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)
