"""ApiVersions: which APIs and versions this broker speaks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..server.dispatch import RequestContext
from .common import Body

if TYPE_CHECKING:
    from .host import BrokerHost


async def handle_api_versions(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    return dict(broker.dispatcher.supported_versions(), throttle_time_ms=0)
