"""The pieces of the connection limits, in process: the request memory pool, the creation rate,
the settings read from the config, and a Connection's framing under the pool and the frame
deadline's bookkeeping (driven through a fake transport). The limits against a live broker, and
against Kafka, are in ``tests/integration/test_connection_limits.py``."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest
from riverlog.config import BrokerConfig, ConfigError
from riverlog.server.connection import Connection, Response
from riverlog.server.limits import INT_MAX, ConnectionLimits, CreationRate, ip_key
from riverlog.server.memory_pool import MemoryPool

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


# --- MemoryPool -----------------------------------------------------------------------------------

def test_pool_is_non_strict_and_hands_released_memory_to_waiters_in_order() -> None:
    pool = MemoryPool(100)
    assert pool.try_reserve(80)
    assert pool.try_reserve(80)  # any memory left is enough (Kafka's non-strict pool)
    assert pool.available == -60
    assert not pool.try_reserve(1)
    pool.take(5)  # bytes in memory already are counted, never refused
    assert pool.available == -65
    granted: list[str] = []
    pool.wait(30, lambda: granted.append("a"))
    pool.wait(30, lambda: granted.append("b"))
    pool.release(85)  # 20 left: "a" gets its 30 (non-strict), "b" waits
    assert granted == ["a"] and pool.available == -10
    assert not pool.try_reserve(1)
    pool.release(80)
    assert granted == ["a", "b"] and pool.available == 40
    assert pool.try_reserve(1) and pool.available == 39  # nobody waits now: reservations go through
    pool.release(1)
    pool.release(30)
    pool.release(30)
    assert pool.available == pool.capacity == 100 and pool.used == 0


def test_pool_cancel_leaves_the_queue() -> None:
    pool = MemoryPool(10)
    assert pool.try_reserve(10)
    granted: list[int] = []

    def callback() -> None:
        granted.append(1)

    pool.wait(5, callback)
    assert pool.cancel(callback)
    assert not pool.cancel(callback)
    pool.release(10)
    assert granted == [] and pool.available == 10


# --- CreationRate and ConnectionLimits ------------------------------------------------------------

def test_creation_rate_allows_a_second_of_burst_then_spaces_accepts() -> None:
    rate = CreationRate(10, now=0.0)
    assert [rate.delay(0.0) for _ in range(10)] == [0.0] * 10
    assert rate.delay(0.0) == pytest.approx(0.1)
    assert rate.delay(0.0) == pytest.approx(0.2)
    assert rate.delay(5.0) == 0.0  # refilled
    for _ in range(100):
        assert rate.delay(5.0) <= 1.0  # never more than Kafka's one-second cap
    assert CreationRate(0, now=0.0).delay(0.0) == 1.0


def test_limits_from_config() -> None:
    limits = ConnectionLimits.from_config(BrokerConfig({}))
    assert limits.max_connections == limits.max_connections_per_ip == INT_MAX
    assert limits.max_connection_creation_rate == INT_MAX
    assert limits.connections_max_idle_ms == 600_000
    assert limits.queued_max_request_bytes == -1
    assert limits.request_frame_timeout_ms == 30_000
    limits = ConnectionLimits.from_config(BrokerConfig({
        "max.connections.per.ip": "0",
        "max.connections.per.ip.overrides": "127.0.0.2:3, [::1]:4,localhost:5",
        "queued.max.request.bytes": "104857600",
    }))
    assert limits.max_for_ip("127.0.0.2") == 3
    assert limits.max_for_ip("::1") in (4, 5)  # localhost may resolve to ::1 too
    assert limits.max_for_ip("127.0.0.1") == 5
    assert limits.max_for_ip("10.0.0.1") == 0
    assert ip_key("::ffff:127.0.0.2") == "127.0.0.2"


@pytest.mark.parametrize("props", [
    {"max.connections.per.ip": "0"},
    {"max.connections": "-1"},
    {"max.connection.creation.rate": "2147483648"},
    {"max.connections.per.ip.overrides": "127.0.0.1"},
    {"max.connections.per.ip.overrides": "127.0.0.1:x"},
    {"connections.max.idle.ms": "0"},
    {"socket.request.frame.timeout.ms": "0"},
    {"queued.max.request.bytes": "1000"},  # smaller than socket.request.max.bytes
])
def test_limits_config_refused(props: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        BrokerConfig(props)


# --- Connection framing ---------------------------------------------------------------------------

class FakeTransport:
    def __init__(self) -> None:
        self.reading = True
        self.closed = False
        self.written: list[bytes] = []

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1234) if name == "peername" else default


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class Harness:
    """A Connection whose handler records frames and waits until released."""

    def __init__(self, pool: MemoryPool | None = None, max_queued: int = 100) -> None:
        self.frames: list[bytes] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.lost: list[Connection] = []
        self.conn = Connection(self.handle, max_frame=1 << 20, max_queued=max_queued,
                               on_close=self.lost.append, pool=pool)
        self.transport = FakeTransport()
        self.conn.connection_made(self.transport)  # type: ignore[arg-type]

    async def handle(self, data: memoryview, conn: Connection) -> Response | None:
        self.frames.append(bytes(data))
        await self.gate.wait()
        return None


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_frames_split_anywhere_are_reassembled() -> None:
    async def run() -> None:
        payloads = [bytes([i]) * (8 + i * 37) for i in range(12)]
        stream = b"".join(frame(p) for p in payloads)
        for step in (1, 3, 7, 64, len(stream)):
            h = Harness()
            for at in range(0, len(stream), step):
                h.conn.data_received(stream[at:at + step])
            await settle()
            assert h.frames == payloads
            assert h.conn.frame_started is None
    asyncio.run(run())


def test_frame_started_follows_the_incomplete_frame() -> None:
    async def run() -> None:
        h = Harness()
        data = frame(b"x" * 20)
        assert h.conn.frame_started is None
        h.conn.data_received(data[:2])
        started = h.conn.frame_started
        assert started is not None
        await asyncio.sleep(0.01)
        h.conn.data_received(data[2:10])
        assert h.conn.frame_started == started  # from the first byte, not the latest
        h.conn.data_received(data[10:] + data[:1])  # this frame ends, the next begins
        assert h.conn.frame_started is not None and h.conn.frame_started > started
        h.conn.data_received(data[1:])
        assert h.conn.frame_started is None
    asyncio.run(run())


def test_invalid_frame_size_closes() -> None:
    async def run() -> None:
        h = Harness()
        h.conn.data_received(struct.pack(">i", (1 << 20) + 1))
        assert h.transport.closed
    asyncio.run(run())


def test_pool_pauses_half_sent_frames_not_whole_requests() -> None:
    async def run() -> None:
        pool = MemoryPool(100)
        hoarder, ordinary, late = Harness(pool), Harness(pool), Harness(pool)
        hoarder.conn.data_received(frame(b"h" * 1000)[:150])
        assert pool.used == 1000  # the declared size is reserved (non-strict), 146 bytes buffered
        assert hoarder.transport.reading and hoarder.conn.frame_started is not None
        # A request that arrives whole is served although the pool is spent, and counted until
        # it has been handled.
        ordinary.gate.clear()
        ordinary.conn.data_received(frame(b"o" * 20))
        await settle()
        assert ordinary.frames == [b"o" * 20] and ordinary.transport.reading and pool.used == 1020
        # A half-sent one waits for memory without reading on, and its frame deadline does not
        # run meanwhile (the broker holds it back, not the client).
        late.conn.data_received(frame(b"l" * 50)[:10])
        assert not late.transport.reading and late.conn.busy and late.conn.frame_started is None
        assert pool.used == 1026  # its 6 bytes read so far
        ordinary.gate.set()
        await settle()
        assert pool.used == 1006 and not late.transport.reading
        hoarder.conn.close()
        hoarder.conn.connection_lost(None)  # the reservation comes back: the waiter gets its own
        await settle()
        assert late.transport.reading and late.conn.frame_started is not None and pool.used == 50
        late.conn.data_received(frame(b"l" * 50)[10:])
        await settle()
        assert late.frames == [b"l" * 50] and pool.used == 0
    asyncio.run(run())


def test_charges_are_released_when_the_connection_goes() -> None:
    async def run() -> None:
        pool = MemoryPool(1000)
        h = Harness(pool)
        h.gate.clear()
        h.conn.data_received(frame(b"a" * 100) + frame(b"b" * 100) + frame(b"c" * 500)[:50])
        await settle()
        assert pool.used == 700  # one in its handler, one queued, one reserved while arriving
        granted_late = Harness(pool)
        granted_late.conn.data_received(frame(b"d" * 400)[:10])  # 300 left: reserved at once
        assert pool.used == 1100
        waiting = Harness(pool)
        waiting.conn.data_received(frame(b"e" * 100)[:20])  # nothing left: waits with 16 bytes
        assert pool.used == 1116
        h.conn.close()
        h.conn.connection_lost(None)  # 500 back: "waiting" is granted its 100
        waiting.conn.close()
        waiting.conn.connection_lost(None)  # before its grant was carried out
        granted_late.conn.close()
        granted_late.conn.connection_lost(None)
        h.gate.set()
        await settle()
        assert pool.used == 0
        assert waiting.frames == []
    asyncio.run(run())


def test_a_connection_closed_before_it_is_made_closes_its_transport() -> None:
    async def run() -> None:
        conn = Connection(Harness().handle, max_frame=1 << 20, max_queued=100, on_close=lambda c: None)
        assert not conn.made
        conn.close()  # e.g. the server shutting down between accept and connection_made
        transport = FakeTransport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        assert transport.closed and conn.made
    asyncio.run(run())
