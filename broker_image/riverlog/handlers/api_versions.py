"""ApiVersions: which APIs and versions this broker speaks, and its features.

Riverlog's features (``controller/features.py``, today ``transaction.version``) are announced as
supported with their ranges (left out before ApiVersions v4, as Kafka leaves out features whose
minimum is 0 there: older clients refused a minimum of 0, KAFKA-17011) and as finalized at the
metadata image's level (a level of 0 is not listed, as in Kafka). The features epoch is the
metadata offset this broker applied, as Kafka's; Java clients take the features of the broker
with the highest epoch, and use transaction version 2 when it is finalized at 2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..controller.features import SUPPORTED, finalized_features
from ..server.dispatch import RequestContext
from .common import Body

if TYPE_CHECKING:
    from .host import BrokerHost


FEATURES_FROM_VERSION = 3
MIN_ZERO_FEATURES_FROM_VERSION = 4


async def handle_api_versions(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    body = dict(broker.dispatcher.supported_versions(), throttle_time_ms=0)
    if ctx.version < FEATURES_FROM_VERSION:
        return body
    image = broker.image
    if ctx.version >= MIN_ZERO_FEATURES_FROM_VERSION:
        body["supported_features"] = [{"name": name, "min_version": low, "max_version": high}
                                      for name, (low, high) in SUPPORTED.items()]
    body["finalized_features_epoch"] = max(image.offset, 0)
    body["finalized_features"] = [{"name": name, "max_version_level": level, "min_version_level": level}
                                  for name, level in finalized_features(image).items()]
    return body
