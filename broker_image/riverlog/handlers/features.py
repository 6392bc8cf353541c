"""UpdateFeatures: finalized feature levels, decided by the active controller
(``controller/features.py``); ApiVersions announces them. With an authorizer: ALTER on the cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..controller.features import SAFE_DOWNGRADE, UPGRADE, FeatureUpdate
from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from .authorize import DENIED_MESSAGE, Operation, on_cluster
from .common import Body

if TYPE_CHECKING:
    from .host import BrokerHost

RESULTS_UNTIL_VERSION = 1  # version 2 answers with the top-level error only


async def handle_update_features(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    updates = [FeatureUpdate(u["feature"], u["max_version_level"], _upgrade_type(u, ctx.version))
               for u in req["feature_updates"]]
    body: Body = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "results": []}
    if not on_cluster(broker, ctx, Operation.ALTER):
        body.update(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    error_message=DENIED_MESSAGE[ErrorCode.CLUSTER_AUTHORIZATION_FAILED])
        if ctx.version <= RESULTS_UNTIL_VERSION:
            body["results"] = [{"feature": u.name, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                "error_message": DENIED_MESSAGE[ErrorCode.CLUSTER_AUTHORIZATION_FAILED]}
                               for u in updates]
        return body
    names = [u.name for u in updates]
    if len(set(names)) != len(names):
        body.update(error_code=ErrorCode.INVALID_REQUEST, error_message="The request names a feature more than once.")
        return body
    try:
        outcomes = await broker.controller.update_features(updates, validate_only=req.get("validate_only", False))
    except KafkaError as exc:
        body.update(error_code=exc.code, error_message=exc.message or None)
        return body
    if ctx.version <= RESULTS_UNTIL_VERSION:
        body["results"] = [{"feature": o.name, "error_code": o.error, "error_message": o.message}
                           for o in outcomes]
    else:
        failed = next((o for o in outcomes if o.error != ErrorCode.NONE), None)
        if failed is not None:
            body.update(error_code=failed.error, error_message=failed.message)
    return body


def _upgrade_type(update: Body, version: int) -> int:
    if version == 0:  # allow_downgrade, before upgrade types
        return SAFE_DOWNGRADE if update.get("allow_downgrade") else UPGRADE
    return int(update["upgrade_type"])
