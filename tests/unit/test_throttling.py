"""Client quotas at the request boundary (server/throttling.py, dispatch, connection): handling
time counts only while a handler runs, answers carry the throttle time (a throttled consumer
fetch empty, an acks=0 produce none), and a connection reads and handles nothing while muted."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest
from riverlog.metrics import Metrics
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.header import RequestHeader, encode_request_header
from riverlog.protocol.messages import MESSAGES
from riverlog.protocol.primitives import Reader, Writer
from riverlog.quotas.manager import ClientQuotaManager
from riverlog.quotas.rate import WindowConfig
from riverlog.server import throttling
from riverlog.server.connection import Connection, Response
from riverlog.server.dispatch import Api, Dispatcher
from riverlog.server.throttling import TimedCall, is_follower_fetch, throttled_fetch, user_of

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_handling_time_counts_the_handlers_steps_not_its_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(throttling.time, "perf_counter", clock)

    async def run() -> float:
        replicated = asyncio.Event()

        async def handler() -> str:
            clock.now += 0.005  # work before waiting for replication
            await replicated.wait()
            clock.now += 0.003  # work after
            return "answer"

        async def replication() -> None:
            clock.now += 2.0  # time passes while the handler waits: not its time
            replicated.set()

        timed = TimedCall(handler())
        waiter = asyncio.ensure_future(replication())
        assert await timed == "answer"
        await waiter
        return timed.busy_s

    assert asyncio.run(run()) == pytest.approx(0.008)


def test_a_timed_handlers_errors_and_cancellation_pass_through() -> None:
    async def failing() -> None:
        await asyncio.sleep(0)
        raise ValueError("bad request")

    async def waiting() -> None:
        await TimedCall(asyncio.sleep(10))

    async def run() -> None:
        with pytest.raises(ValueError):
            await TimedCall(failing())
        task = asyncio.ensure_future(waiting())
        await _yield()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())


def test_helpers() -> None:
    assert user_of("User:alice") == "alice" and user_of("User:CN=app,O=x") == "CN=app,O=x"
    assert is_follower_fetch({"replica_id": 2})
    assert is_follower_fetch({"replica_id": -1, "replica_state": {"replica_id": 0}})
    assert not is_follower_fetch({"replica_id": -1, "replica_state": {"replica_id": -1}})
    full = throttled_fetch({"session_id": 0}, {"session_id": 77, "responses": [1]}, 500)
    assert full == {"throttle_time_ms": 500, "error_code": 0, "session_id": 0, "responses": []}
    assert throttled_fetch({"session_id": 77}, {"session_id": 77}, 500)["session_id"] == 77


# --- through the dispatcher --------------------------------------------------------------------

QUOTAS = {(("client-id", "app"),): {"producer_byte_rate": 100.0, "consumer_byte_rate": 100.0}}


class Conn:
    peer = "test"
    sasl = None
    principal = "User:ANONYMOUS"


SEEN: list[dict[str, Any]] = []


def dispatcher_with(key: ApiKey, answer: dict[str, Any] | None) -> tuple[Dispatcher, ClientQuotaManager]:
    request, response = MESSAGES[key]

    async def handler(ctx: Any, body: dict[str, Any]) -> dict[str, Any] | None:
        SEEN.append(body)
        return None if answer is None else dict(answer)

    manager = ClientQuotaManager(WindowConfig(), clock=lambda: 0)
    manager.update(QUOTAS)
    api = Api(int(key), request, response, handler, request.valid[0], request.valid[1])
    return Dispatcher({int(key): api}, Metrics(), manager), manager


def request_frame(key: ApiKey, version: int, body: dict[str, Any]) -> memoryview:
    request, _response = MESSAGES[key]
    w = Writer()
    encode_request_header(w, RequestHeader(key, version, 7, "app"), request.is_flexible(version))
    request.encode_into(w, body, version)
    return memoryview(b"".join(c for c in w.chunks() if isinstance(c, bytes)))


def decoded(key: ApiKey, version: int, response: Response) -> dict[str, Any]:
    _request, message = MESSAGES[key]
    data = b"".join(c for c in response.chunks if isinstance(c, bytes))
    reader = Reader(data[4 + 4:])  # size, correlation id
    if message.is_flexible(version):
        reader.uvarint()  # the response header's tagged fields
    return message.decode(reader, version)


def test_a_produce_over_its_quota_is_answered_with_the_throttle_and_mutes() -> None:
    payload = {"acks": 1, "timeout_ms": 1000, "topic_data": [{"name": "t", "partition_data": [
        {"index": 0, "records": b"x" * 2000}]}]}
    dispatcher, _manager = dispatcher_with(ApiKey.PRODUCE, {"responses": [], "throttle_time_ms": 0})
    frame = request_frame(ApiKey.PRODUCE, 9, payload)
    response = asyncio.run(dispatcher.handle(frame, Conn()))  # type: ignore[arg-type]
    assert response is not None
    # ~2 kB over ten windows is about 200 B/s against 100 B/s: throttled about ten seconds.
    assert 9000 < response.throttle_ms < 12000
    assert decoded(ApiKey.PRODUCE, 9, response)["throttle_time_ms"] == response.throttle_ms


def test_an_acks_0_produce_over_its_quota_gets_no_answer_but_still_mutes() -> None:
    payload = {"acks": 0, "timeout_ms": 1000, "topic_data": [{"name": "t", "partition_data": [
        {"index": 0, "records": b"x" * 2000}]}]}
    dispatcher, _manager = dispatcher_with(ApiKey.PRODUCE, None)
    response = asyncio.run(dispatcher.handle(request_frame(ApiKey.PRODUCE, 9, payload), Conn()))  # type: ignore[arg-type]
    assert response is not None and response.chunks == [] and response.throttle_ms > 0


def test_a_consumer_fetch_over_its_quota_is_answered_empty_and_capped() -> None:
    data = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic_id": None, "topic": "t", "partitions": [{"partition_index": 0, "high_watermark": 5,
                                                          "records": b"y" * 3000}]}]}
    dispatcher, manager = dispatcher_with(ApiKey.FETCH, data)
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 50_000_000, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [], "forgotten_topics_data": []}
    response = asyncio.run(dispatcher.handle(request_frame(ApiKey.FETCH, 12, body), Conn()))  # type: ignore[arg-type]
    assert response is not None and response.throttle_ms > 0
    answer = decoded(ApiKey.FETCH, 12, response)
    assert answer["responses"] == [] and answer["throttle_time_ms"] == response.throttle_ms
    # The handler was asked for at most the quota's ten windows (100 B/s: 1000 bytes), and the
    # bytes of the answer not sent were taken back.
    assert SEEN[-1]["max_bytes"] == 1000
    (fetch,) = [stats for stats in manager.stats() if stats[0] == "fetch"]
    assert fetch[7] == 0


# --- the muted connection ----------------------------------------------------------------------

class Transport:
    def __init__(self) -> None:
        self.reading = True
        self.written: list[bytes] = []

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def close(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default


def test_a_throttled_connection_reads_and_handles_nothing_until_the_throttle_ends(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def run() -> None:
        throttle_over = asyncio.Event()
        muted_for: list[float] = []

        async def fake_sleep(seconds: float) -> None:  # the mute's wait, ended by the test
            muted_for.append(seconds)
            await throttle_over.wait()

        handled: list[bytes] = []

        async def handle(data: memoryview, conn: Connection) -> Response:
            handled.append(bytes(data))
            return Response([b"answer-" + bytes(data)], throttle_ms=1500 if len(handled) == 1 else 0)

        conn = Connection(handle, max_frame=1 << 20, max_queued=100, on_close=lambda c: None)
        transport = Transport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        monkeypatch.setattr(asyncio, "sleep", fake_sleep)
        try:
            frames = b"".join(struct.pack(">i", 8) + bytes([i]) * 8 for i in range(2))
            conn.data_received(frames)
            for _ in range(10):
                await _yield()
            assert handled == [b"\0" * 8]  # the second request waits for the throttle to end
            assert transport.written == [b"answer-" + b"\0" * 8]  # the answer went out at once
            assert not transport.reading and muted_for == [1.5]
            throttle_over.set()
            for _ in range(10):
                await _yield()
            assert handled == [b"\0" * 8, b"\1" * 8] and transport.reading
        finally:
            monkeypatch.undo()
            conn.close()

    asyncio.run(run())


async def _yield() -> None:
    """One turn of the event loop (asyncio.sleep is replaced while a connection is muted)."""
    loop = asyncio.get_running_loop()
    turn = loop.create_future()
    loop.call_soon(turn.set_result, None)
    await turn
