"""InitProducerId for idempotent producers (transactions come later)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.errors import ErrorCode
from ..server.dispatch import RequestContext
from .common import Body

if TYPE_CHECKING:
    from ..broker import Broker


async def handle_init_producer_id(broker: Broker, ctx: RequestContext, req: Body) -> Body:
    if req.get("transactional_id"):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
    # An idempotent producer re-initialising (KIP-360) simply gets a fresh id: its old
    # sequences can never collide with the new id's.
    producer_id = await broker.controller.allocate_producer_id(broker.node_id)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id,
            "producer_epoch": 0}
