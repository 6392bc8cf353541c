"""The ACL checks handlers make, as one-liners over the connection a request came on.

Every answer comes from the broker's ``security.access.AccessControl`` (allowing everything
when no authorizer is configured).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.errors import ErrorCode
from ..security.acl import CLUSTER_NAME, Operation, ResourceType

if TYPE_CHECKING:
    from ..server.dispatch import RequestContext
    from .host import BrokerHost, QuorumHost


# Kafka's own messages of its authorization errors (Errors.X.message()).
DENIED_MESSAGE = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
}


def allowed(broker: BrokerHost, ctx: RequestContext, operation: Operation, resource_type: ResourceType, name: str,
            *, log_denial: bool = True) -> bool:
    access = broker.access
    return not access.enabled or access.allowed(ctx.connection, operation, resource_type, name,
                                                log_denial=log_denial)


def on_topic(broker: BrokerHost, ctx: RequestContext, operation: Operation, name: str) -> bool:
    return allowed(broker, ctx, operation, ResourceType.TOPIC, name)


def on_group(broker: BrokerHost, ctx: RequestContext, operation: Operation, name: str) -> bool:
    return allowed(broker, ctx, operation, ResourceType.GROUP, name)


def on_transactional_id(broker: BrokerHost, ctx: RequestContext, operation: Operation, name: str) -> bool:
    return allowed(broker, ctx, operation, ResourceType.TRANSACTIONAL_ID, name)


def on_cluster(broker: QuorumHost, ctx: RequestContext, operation: Operation) -> bool:
    access = broker.access
    return not access.enabled or access.cluster(ctx.connection, operation)


__all__ = ["CLUSTER_NAME", "DENIED_MESSAGE", "Operation", "ResourceType", "allowed", "on_cluster", "on_group",
           "on_topic", "on_transactional_id"]
