"""Request dispatch: header → handler → encoded response, with the protocol's error answers.

Requests the broker cannot understand never hang: an unsupported ApiVersions version gets the
v0 UNSUPPORTED_VERSION answer (so the client can retry); any other unknown key or version, and
any undecodable body, gets the connection closed without an answer, as Kafka does.

While some client quota is set, each request is counted against it (``throttling.py``) and its
answer carries the throttle time, with which the connection is then muted (``connection.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..metrics import Metrics
from ..protocol.api_keys import PRIVATE_API_KEY_BASE, ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.header import (
    RequestHeader,
    decode_request_header,
    encode_response_header,
    peek_header,
    response_header_flexible,
)
from ..protocol.messages import api_versions
from ..protocol.primitives import DecodeError, Reader, Writer
from ..protocol.schema import Message
from ..quotas.manager import ClientQuotaManager, QuotaKind
from .connection import Connection, Response
from .throttling import RequestQuotas, encoded_size, throttled_fetch

log = logging.getLogger(__name__)

# The ``api`` label of request errors for API keys the broker does not serve.
UNKNOWN_API_LABEL = "unknown"
# The ``api`` label of requests refused for coming before SASL authentication.
UNAUTHENTICATED_LABEL = "unauthenticated"


@dataclass(slots=True)
class RequestContext:
    header: RequestHeader
    connection: Connection
    close_after: bool = False  # a handler's answer that ends the connection (a failed SASL exchange)

    @property
    def version(self) -> int:
        return self.header.api_version


HandlerFn = Callable[[RequestContext, dict[str, Any]], Awaitable[dict[str, Any] | None]]


@dataclass(frozen=True)
class Api:
    key: int
    request: Message
    response: Message
    handler: HandlerFn
    min_version: int
    max_version: int


class Dispatcher:
    def __init__(self, apis: dict[int, Api], metrics: Metrics, quotas: ClientQuotaManager | None = None) -> None:
        self.apis = apis
        self.metrics = metrics
        self.quotas = quotas  # client quotas (throttling.py); None on a dedicated controller
        self._api_versions_body = {
            "error_code": 0,
            "api_keys": [
                {"api_key": a.key, "min_version": a.min_version, "max_version": a.max_version}
                for a in sorted(apis.values(), key=lambda a: a.key)
                if a.key < PRIVATE_API_KEY_BASE  # Riverlog's node-to-node calls stay unlisted
            ],
        }

    def supported_versions(self) -> dict[str, Any]:
        return self._api_versions_body

    async def handle(self, frame: memoryview, conn: Connection) -> Response | None:
        reader = Reader(frame)
        try:
            api_key, version, correlation_id = peek_header(reader)
        except DecodeError:
            return Response([], close_after=True)
        sasl = conn.sasl
        if sasl is not None and not sasl.allows(api_key, int(time.time() * 1000)):
            # Kafka's rule: before (re-)authentication only ApiVersions, SaslHandshake and
            # SaslAuthenticate; anything else closes the connection before a handler sees it.
            log.info("closing %s on %s: request %d before SASL authentication completed (state %s)",
                     conn.peer, conn.listener, api_key, sasl.state)
            self.metrics.request_errors.labels(api=UNAUTHENTICATED_LABEL).inc()
            return Response([], close_after=True)
        api = self.apis.get(api_key)
        if api is None or not api.request.supports(version) or not api.min_version <= version <= api.max_version:
            return self._unsupported(api_key, version, correlation_id, conn)
        started = time.perf_counter()
        name = api.request.name.removesuffix("Request")
        try:
            reader.pos = 0
            flexible = api.request.is_flexible(version)
            header = decode_request_header(reader, flexible)
            body = api.request.decode(reader, version)
        except DecodeError as exc:
            log.debug("closing %s: undecodable %s v%d: %s", conn.peer, name, version, exc)
            self.metrics.request_errors.labels(api=name).inc()
            return Response([], close_after=True)
        ctx = RequestContext(header, conn)
        accounting = None if self.quotas is None or not self.quotas.active else RequestQuotas(
            self.quotas, api_key, body, conn.principal, header.client_id)
        if accounting is not None:
            accounting.cap_fetch(body)
        try:
            call = api.handler(ctx, body)
            result = await (call if accounting is None else accounting.call(call))
        except Exception:
            log.exception("handler for %s v%d failed", name, version)
            self.metrics.request_errors.labels(api=name).inc()
            return Response([], close_after=True)
        finally:
            elapsed = time.perf_counter() - started
            self.metrics.requests.labels(api=name).inc()
            self.metrics.request_latency.labels(api=name).observe(elapsed)
        if accounting is None:
            if result is None:
                return None  # acks=0 produce: the protocol sends no response at all
            return Response(self._encode(api.response, api_key, version, correlation_id, result),
                            close_after=ctx.close_after)
        return self._throttled(accounting, api, version, correlation_id, len(frame), body, result, ctx)

    def _throttled(self, accounting: RequestQuotas, api: Api, version: int, correlation_id: int,
                   request_size: int, body: dict[str, Any], result: dict[str, Any] | None,
                   ctx: RequestContext) -> Response | None:
        """The response with the quotas' throttle time in it, and the connection muted for it."""
        throttle, kind = accounting.before_response(request_size)
        if result is None:  # acks=0: no answer, but the connection is still muted (as Kafka does)
            if throttle and kind is not None:
                accounting.throttled(kind, throttle)
                return Response([], throttle_ms=throttle)
            return None
        if throttle:  # (a version without the field leaves it out when encoding)
            result["throttle_time_ms"] = max(throttle, result.get("throttle_time_ms") or 0)
        chunks = self._encode(api.response, api.key, version, correlation_id, result)
        if accounting.fetch:
            fetch_throttle = accounting.fetch_throttle(encoded_size(chunks), throttle)
            if fetch_throttle > throttle:
                throttle, kind = fetch_throttle, QuotaKind.FETCH
            if throttle:
                chunks = self._encode(api.response, api.key, version, correlation_id,
                                      throttled_fetch(body, result, throttle))
        if throttle and kind is not None:
            accounting.throttled(kind, throttle)
        return Response(chunks, close_after=ctx.close_after, throttle_ms=throttle)

    @staticmethod
    def _encode(message: Message, api_key: int, version: int, correlation_id: int,
                body: dict[str, Any]) -> list[Any]:
        w = Writer()
        w.int32(0)  # size, patched below once the body (and any file regions) is known
        encode_response_header(w, correlation_id, response_header_flexible(api_key, message.is_flexible(version)))
        message.encode_into(w, body, version)
        w.buf[0:4] = (w.size() - 4).to_bytes(4, "big")
        return w.chunks()

    def _unsupported(self, api_key: int, version: int, correlation_id: int, conn: Connection) -> Response:
        # Keys the broker does not serve share one label: a label per key a client sends would
        # let any client add up to 65,536 series to every scrape and to the broker's memory.
        self.metrics.request_errors.labels(api=UNKNOWN_API_LABEL if api_key not in self.apis else
                                           self.apis[api_key].request.name.removesuffix("Request")).inc()
        if api_key == ApiKey.API_VERSIONS:
            # KIP-511: answer in v0 with our ranges so the client can pick a version we know.
            body = dict(self._api_versions_body, error_code=ErrorCode.UNSUPPORTED_VERSION)
            return Response(self._encode(api_versions.RESPONSE, api_key, 0, correlation_id, body))
        # As Kafka: no answer, the connection is closed (a bare error code is no response any
        # client could decode as the API it asked for).
        log.debug("closing %s: unsupported api key %d version %d", conn.peer, api_key, version)
        return Response([], close_after=True)
