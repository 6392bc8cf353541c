"""Client quotas at the request boundary: what a request counts, and the throttle its answer carries.

Kafka's KafkaApis counts, per request (``quotas/manager.py`` keeps the rates):

* Produce: the request's size against the producer byte rate;
* Fetch from a consumer (not from a follower replica): the response's size against the consumer
  byte rate; a throttled fetch is answered *empty* with its throttle time, and its bytes are
  taken back (the consumer fetches them again once the throttle ends); so that some answer
  always fits, such a consumer's fetch is capped to what its quota lets through over the
  windows (Kafka's ``maxQuotaWindowBytes``);
* every client request: the time the broker spent handling it against the request percentage
  (cluster actions, follower fetches and Riverlog's node-to-node calls are exempt).

The answer carries the largest of the throttle times in ``throttle_time_ms`` and the connection
reads nothing more for that long once the response is sent (KIP-219; ``connection.py``).

The handling time is the time the handler's coroutine actually ran on the event loop: each step
between two awaits is timed (``timed``), so time spent waiting for replication or a purgatory is
not counted, as Kafka counts request thread time and not purgatory time. Timing happens only while
some request percentage quota exists.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Generator
from typing import Any, TypeVar

from ..protocol.api_keys import PRIVATE_API_KEY_BASE, ApiKey
from ..quotas.manager import ClientQuotaManager, QuotaKind

T = TypeVar("T")

# Kafka's cluster actions: node-to-node RPCs that never count against a client's request quota.
EXEMPT_APIS = frozenset({
    ApiKey.WRITE_TXN_MARKERS, ApiKey.VOTE, ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH,
    ApiKey.ALTER_PARTITION, ApiKey.FETCH_SNAPSHOT, ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT,
    ApiKey.ALLOCATE_PRODUCER_IDS,
})
# Kafka's NANOS_TO_PERCENTAGE_PER_SECOND, per second: a second of handling is 100 percent-seconds.
PERCENT_PER_SECOND = 100.0
MAX_INT32 = 2**31 - 1
_SIZE_PREFIX = 4


class TimedCall:
    """Awaits a coroutine and adds up the time its steps ran (``busy_s``)."""

    __slots__ = ("_awaitable", "busy_s")

    def __init__(self, awaitable: Awaitable[T]) -> None:
        self._awaitable = awaitable
        self.busy_s = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        inner = self._awaitable.__await__()
        sent: Any = None
        error: BaseException | None = None
        while True:
            started = time.perf_counter()
            try:
                yielded = inner.send(sent) if error is None else inner.throw(error)
            except StopIteration as stop:
                return stop.value
            finally:
                self.busy_s += time.perf_counter() - started
            try:
                sent, error = (yield yielded), None
            except BaseException as exc:  # CancelledError included: passed on to the handler
                sent, error = None, exc


def is_follower_fetch(body: dict[str, Any]) -> bool:
    replica_id = body.get("replica_id", -1)
    if replica_id is None or replica_id < 0:
        state = body.get("replica_state") or {}
        replica_id = state.get("replica_id", -1) if state else -1
    return replica_id is not None and replica_id >= 0


def user_of(principal: str) -> str:
    """Kafka's quota user: the principal's name (``User:alice`` counts as ``alice``)."""
    return principal.split(":", 1)[1] if ":" in principal else principal


class RequestQuotas:
    """One request's quota accounting (``ClientQuotaManager`` holds the rates)."""

    __slots__ = ("manager", "api_key", "user", "client_id", "exempt", "fetch", "timer")

    def __init__(self, manager: ClientQuotaManager, api_key: int, body: dict[str, Any], principal: str,
                 client_id: str | None) -> None:
        self.manager = manager
        self.api_key = api_key
        self.user = user_of(principal)
        self.client_id = client_id or ""
        follower = api_key == ApiKey.FETCH and is_follower_fetch(body)
        self.exempt = api_key >= PRIVATE_API_KEY_BASE or api_key in EXEMPT_APIS or follower
        self.fetch = api_key == ApiKey.FETCH and not follower
        self.timer: TimedCall | None = None

    def cap_fetch(self, body: dict[str, Any]) -> None:
        """A consumer with a byte-rate quota fetches at most what the quota lets through over
        its windows (Kafka's maxQuotaWindowBytes): a larger answer would be throttled, answered
        empty and asked for again forever."""
        if not self.fetch:
            return
        cap = self.manager.max_value_in_window(QuotaKind.FETCH, self.user, self.client_id)
        if cap is not None:
            body["max_bytes"] = max(1, min(body.get("max_bytes") or MAX_INT32, int(cap)))

    def call(self, awaitable: Awaitable[T]) -> Awaitable[T]:
        """The handler's call, timed when request time is counted."""
        if self.exempt or not self.manager.enabled(QuotaKind.REQUEST):
            return awaitable
        self.timer = TimedCall(awaitable)
        return self.timer

    def before_response(self, request_size: int) -> tuple[int, QuotaKind | None]:
        """Count the request's bytes (Produce) and handling time; the throttle time so far and
        the kind that decided it."""
        throttle, kind = 0, None
        if self.api_key == ApiKey.PRODUCE:
            throttle = self.manager.record(QuotaKind.PRODUCE, self.user, self.client_id, request_size)
            kind = QuotaKind.PRODUCE if throttle else None
        if self.timer is not None:
            request_throttle = self.manager.record(QuotaKind.REQUEST, self.user, self.client_id,
                                                   self.timer.busy_s * PERCENT_PER_SECOND)
            if request_throttle > throttle:
                throttle, kind = request_throttle, QuotaKind.REQUEST
        return throttle, kind

    def fetch_throttle(self, response_size: int, throttle_so_far: int) -> int:
        """Count a consumer fetch's response bytes; its own throttle time. A fetch throttled for
        either quota is answered empty, so its bytes are taken back."""
        throttle = self.manager.record(QuotaKind.FETCH, self.user, self.client_id, response_size)
        if max(throttle, throttle_so_far):
            self.manager.unrecord(QuotaKind.FETCH, self.user, self.client_id, response_size)
        return throttle

    def throttled(self, kind: QuotaKind, throttle_ms: int) -> None:
        self.manager.throttled(kind, self.user, self.client_id, throttle_ms)


def encoded_size(chunks: list[Any]) -> int:
    """The size of an encoded response without its size prefix (Kafka's response size)."""
    return int.from_bytes(chunks[0][:_SIZE_PREFIX], "big") if chunks else 0


def throttled_fetch(request: dict[str, Any], response: dict[str, Any], throttle_ms: int) -> dict[str, Any]:
    """Kafka's throttled fetch answer: no data; a full fetch gets no session, an incremental one
    keeps its session."""
    session = response.get("session_id", 0) if request.get("session_id", 0) else 0
    return {"throttle_time_ms": throttle_ms, "error_code": 0, "session_id": session, "responses": []}
