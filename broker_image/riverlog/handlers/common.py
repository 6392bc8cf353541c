"""Small helpers shared by the request handlers."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from ..protocol.errors import ErrorCode
from ..protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from ..controller.image import BrokerImage, TopicImage
    from ..controller.records import Endpoint
    from ..server.dispatch import RequestContext
    from .host import BrokerHost



def client_endpoint(broker: BrokerHost, ctx: RequestContext, node: BrokerImage) -> Endpoint | None:
    """``node``'s address on the listener the request arrived on, as Kafka answers Metadata,
    FindCoordinator and DescribeCluster: a client on a second listener is handed second-listener
    addresses, and a broker without that listener is left out. Connections made in-process carry
    no listener name: the inter-broker listener (or any) stands in for them."""
    if ctx.connection.listener:
        return node.endpoint(ctx.connection.listener)
    return node.endpoint(broker.config.inter_broker_listener()) or node.endpoint()


def resolve_topic(broker: BrokerHost, name: str | None, topic_id: uuid.UUID | None) -> TopicImage | None:
    """Find a topic by id when the request version carries ids, else by name."""
    image = broker.image
    if topic_id is not None and topic_id != ZERO_UUID:
        return image.topic_by_id(topic_id)
    return image.topics.get(name or "")


def unknown_topic_code(topic_id: uuid.UUID | None) -> ErrorCode:
    if topic_id is not None and topic_id != ZERO_UUID:
        return ErrorCode.UNKNOWN_TOPIC_ID
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def error_message(code: ErrorCode, message: str | None) -> str | None:
    return message if message else (None if code == ErrorCode.NONE else code.name)


Body = dict[str, Any]
