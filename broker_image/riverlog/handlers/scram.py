"""DescribeUserScramCredentials (from this broker's image) and AlterUserScramCredentials (decided by
the active controller): see controller/scram.py. ``kafka-configs --entity-type users
--alter --add-config 'SCRAM-SHA-512=[password=...]'`` and Admin.alterUserScramCredentials use them.
With an authorizer they need DESCRIBE (resp. ALTER) on the cluster, as in Kafka."""

from __future__ import annotations

from ..controller.scram import ScramDeletion, ScramUpsertion, describe_credentials
from ..protocol.errors import ErrorCode
from ..server.dispatch import RequestContext
from .authorize import DENIED_MESSAGE, Operation, on_cluster
from .common import Body
from .host import BrokerHost

CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


async def handle_describe_user_scram_credentials(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    if not on_cluster(broker, ctx, Operation.DESCRIBE):
        # As Kafka's getErrorResponse: the error at the top and once per user asked about (unnamed).
        denied = {"error_code": CLUSTER_DENIED, "error_message": DENIED_MESSAGE[CLUSTER_DENIED]}
        return {"throttle_time_ms": 0, **denied,
                "results": [{"user": "", **denied, "credential_infos": []} for _ in req.get("users") or []]}
    users = [u["name"] for u in req["users"]] if req.get("users") else None
    results = [{"user": d.user, "error_code": d.error, "error_message": d.message,
                "credential_infos": [{"mechanism": m, "iterations": i} for m, i in d.credentials]}
               for d in describe_credentials(broker.image, users)]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "results": results}


async def handle_alter_user_scram_credentials(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    if not on_cluster(broker, ctx, Operation.ALTER):
        names = [d["name"] for d in req["deletions"]] + [u["name"] for u in req["upsertions"]]
        return {"throttle_time_ms": 0, "results": [
            {"user": name, "error_code": CLUSTER_DENIED, "error_message": DENIED_MESSAGE[CLUSTER_DENIED]}
            for name in dict.fromkeys(names)]}
    deletions = [ScramDeletion(d["name"], d["mechanism"]) for d in req["deletions"]]
    upsertions = [ScramUpsertion(u["name"], u["mechanism"], u["iterations"], bytes(u["salt"]),
                                 bytes(u["salted_password"])) for u in req["upsertions"]]
    outcomes = await broker.controller.alter_user_scram_credentials(deletions, upsertions)
    return {"throttle_time_ms": 0,
            "results": [{"user": o.user, "error_code": o.error, "error_message": o.message} for o in outcomes]}
