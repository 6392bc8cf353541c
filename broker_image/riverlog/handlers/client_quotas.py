"""DescribeClientQuotas (from this broker's image) and AlterClientQuotas (decided by the active
controller): see controller/client_quotas.py. ``kafka-configs --entity-type users/clients
--alter --add-config producer_byte_rate=...`` and ``--describe`` use them; quotas are enforced by
``quotas/`` as each request is answered."""

from __future__ import annotations

from ..controller.client_quotas import (
    QuotaAlteration,
    QuotaFilter,
    QuotaFilterError,
    QuotaOp,
    describe_quotas,
)
from ..protocol.errors import ErrorCode
from ..server.dispatch import RequestContext
from .common import Body
from .host import BrokerHost


def _entity_body(entity: tuple[tuple[str, str | None], ...]) -> list[Body]:
    return [{"entity_type": kind, "entity_name": name} for kind, name in entity]


async def handle_describe_client_quotas(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    components = [QuotaFilter(c["entity_type"], c["match_type"], c["match"]) for c in req["components"]]
    try:
        found = describe_quotas(broker.image, components, req["strict"])
    except QuotaFilterError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "error_message": str(exc), "entries": None}
    entries = [{"entity": _entity_body(entity),
                "values": [{"key": key, "value": value} for key, value in values.items()]}
               for entity, values in found]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "entries": entries}


async def handle_alter_client_quotas(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    alterations = [
        QuotaAlteration(tuple((e["entity_type"], e["entity_name"]) for e in entry["entity"]),
                        tuple(QuotaOp(op["key"], op["value"], op["remove"]) for op in entry["ops"]))
        for entry in req["entries"]]
    outcomes = await broker.controller.alter_client_quotas(alterations, validate_only=req["validate_only"])
    return {"throttle_time_ms": 0,
            "entries": [{"error_code": o.error, "error_message": o.message, "entity": _entity_body(o.entity)}
                        for o in outcomes]}
