"""CreateAcls, DescribeAcls and DeleteAcls (Kafka's AclApis).

Creating and deleting need ALTER on the cluster and are decided by the active controller
(``controller/acls.py``, forwarded like every controller call); describing needs DESCRIBE on the
cluster and reads this broker's image. Without an authorizer each answers SECURITY_DISABLED, as
Kafka does; a principal without the cluster permission gets CLUSTER_AUTHORIZATION_FAILED on every
creation, filter, or on the whole description.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..controller.acls import describe_acls
from ..protocol.errors import ErrorCode
from ..security.acl import AclBinding, AclFilter
from ..server.dispatch import RequestContext
from .authorize import DENIED_MESSAGE, Operation, on_cluster
from .common import Body

if TYPE_CHECKING:
    from .host import BrokerHost

NO_AUTHORIZER = "No Authorizer is configured."
DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _refusal(broker: BrokerHost, ctx: RequestContext, operation: Operation) -> tuple[ErrorCode, str] | None:
    # Kafka checks the cluster permission first: with no authorizer it always passes.
    if not on_cluster(broker, ctx, operation):
        return DENIED, DENIED_MESSAGE[DENIED]
    if not broker.access.enabled:
        return ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER
    return None


def _filter(body: Body) -> AclFilter:
    return AclFilter.of(body["resource_type_filter"], body.get("resource_name_filter"),
                        body.get("pattern_type_filter", 3), body.get("principal_filter"), body.get("host_filter"),
                        body["operation"], body["permission_type"])


def _binding_fields(binding: AclBinding) -> Body:
    return {"principal": binding.principal, "host": binding.host, "operation": int(binding.operation),
            "permission_type": int(binding.permission)}


async def handle_create_acls(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    refusal = _refusal(broker, ctx, Operation.ALTER)
    if refusal is not None:
        return {"throttle_time_ms": 0, "results": [{"error_code": refusal[0], "error_message": refusal[1]}
                                                   for _ in req["creations"]]}
    bindings = [AclBinding.of(c["resource_type"], c["resource_name"], c.get("resource_pattern_type", 3),
                              c["principal"], c["host"], c["operation"], c["permission_type"])
                for c in req["creations"]]
    outcomes = await broker.controller.create_acls(bindings)
    return {"throttle_time_ms": 0, "results": [{"error_code": o.error, "error_message": o.message} for o in outcomes]}


async def handle_describe_acls(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    body: Body = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "resources": []}
    refusal = _refusal(broker, ctx, Operation.DESCRIBE)
    acl_filter = _filter(req)
    problem = acl_filter.problem() if refusal is None else None
    if refusal is not None or problem is not None:
        code, message = refusal if refusal is not None else (ErrorCode.INVALID_REQUEST, problem)
        body.update(error_code=code, error_message=message)
        return body
    by_pattern: dict[tuple[int, str, int], list[Body]] = {}
    for binding in describe_acls(broker.image, acl_filter):
        key = (int(binding.resource_type), binding.resource_name, int(binding.pattern_type))
        by_pattern.setdefault(key, []).append(_binding_fields(binding))
    body["resources"] = [{"resource_type": rtype, "resource_name": name, "pattern_type": pattern, "acls": acls}
                         for (rtype, name, pattern), acls in by_pattern.items()]
    return body


async def handle_delete_acls(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    refusal = _refusal(broker, ctx, Operation.ALTER)
    if refusal is not None:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": refusal[0], "error_message": refusal[1], "matching_acls": []} for _ in req["filters"]]}
    outcomes = await broker.controller.delete_acls([_filter(f) for f in req["filters"]])
    return {"throttle_time_ms": 0, "filter_results": [
        {"error_code": o.error, "error_message": o.message, "matching_acls": [
            {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": int(b.resource_type),
             "resource_name": b.resource_name, "pattern_type": int(b.pattern_type), **_binding_fields(b)}
            for b in o.deleted]}
        for o in outcomes]}
