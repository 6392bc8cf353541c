"""SaslHandshake and SaslAuthenticate: a connection's SASL exchange (security/authenticator.py).

On a listener without SASL (PLAINTEXT, SSL), and on a connection that is already authenticated
and not re-authenticating, both answer ILLEGAL_SASL_STATE, as Kafka's broker does.
"""

from __future__ import annotations

import logging
import time

from ..protocol.errors import ErrorCode
from ..server.dispatch import RequestContext
from .common import Body
from .host import BrokerHost

log = logging.getLogger(__name__)


async def handle_sasl_handshake(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    session = ctx.connection.sasl
    if session is None:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    error = session.handshake(req["mechanism"], ctx.version)
    if error != ErrorCode.NONE:
        log.info("closing %s on %s: SaslHandshake %s refused (%s)", ctx.connection.peer, ctx.connection.listener,
                 req["mechanism"], error.name)
        ctx.close_after = True
    return {"error_code": error, "mechanisms": list(session.settings.mechanisms)}


async def handle_sasl_authenticate(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    session = ctx.connection.sasl
    if session is None:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "error_message": "SASL is not enabled on this listener",
                "auth_bytes": b"", "session_lifetime_ms": 0}
    answer = session.authenticate(req["auth_bytes"], int(time.time() * 1000))
    if answer.close:
        log.info("closing %s on %s: SASL authentication failed: %s", ctx.connection.peer, ctx.connection.listener,
                 answer.message)
        ctx.close_after = True
    elif session.principal is not None and answer.error == ErrorCode.NONE and session.state == "authenticated":
        ctx.connection.principal = session.principal
    return {"error_code": answer.error, "error_message": answer.message, "auth_bytes": answer.auth_bytes,
            "session_lifetime_ms": answer.session_lifetime_ms}
