"""Connection limits: misbehaving clients must not stall or exhaust the broker (issue #14).

Kafka's ``connections.max.idle.ms``, ``max.connections``, ``max.connections.per.ip`` (with
overrides), ``max.connection.creation.rate`` and ``queued.max.request.bytes``, and Riverlog's own
``socket.request.frame.timeout.ms``. Every test runs against Riverlog and against Apache Kafka
(``RIVERLOG_TEST_TARGET=kafka``); what only Riverlog has (its metrics, the frame deadline) is
checked by looking at the target inside the test. Clients are raw sockets speaking ApiVersions v0,
so the test sees exactly what the broker does with a connection: answers it, stays silent, or
closes it.
"""

from __future__ import annotations

import asyncio
import resource
import select
import socket
import struct
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from support.process_control import rss_kib

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

IDLE_CONNECTIONS = 2000


# --- a raw Kafka client: ApiVersions v0 -------------------------------------------------------

def api_versions_frame(correlation_id: int = 1) -> bytes:
    client_id = b"limits-test"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def connect(host: str, port: int, source: str | None = None, timeout: float = 10.0) -> socket.socket:
    return socket.create_connection((host, port), timeout=timeout,
                                    source_address=(source, 0) if source else None)


def read_response(sock: socket.socket, timeout: float) -> str:
    """"answered" (a whole response frame), "closed" (EOF or reset) or "silent" (nothing in time)."""
    sock.settimeout(timeout)
    try:
        data = b""
        while len(data) < 4:
            chunk = sock.recv(4 - len(data))
            if not chunk:
                return "closed"
            data += chunk
        size = struct.unpack(">i", data)[0]
        left = size
        while left:
            chunk = sock.recv(min(left, 65536))
            if not chunk:
                return "closed"
            left -= len(chunk)
        return "answered"
    except TimeoutError:
        return "silent"
    except (ConnectionResetError, BrokenPipeError):
        return "closed"


def probe(sock: socket.socket, timeout: float) -> str:
    """Send ApiVersions and say what came of it."""
    try:
        sock.sendall(api_versions_frame())
    except (ConnectionResetError, BrokenPipeError):
        return "closed"
    return read_response(sock, timeout)


def sees_eof(sock: socket.socket) -> bool:
    """True once the broker has closed the connection (checked without blocking)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def wait_answered(host: str, port: int, deadline_s: float, source: str | None = None) -> None:
    """A new connection is served within the deadline (the broker may take a moment to count a
    closed connection out)."""
    deadline = time.monotonic() + deadline_s
    last = ""
    while time.monotonic() < deadline:
        sock = connect(host, port, source)
        try:
            last = probe(sock, 5.0)
        finally:
            sock.close()
        if last == "answered":
            return
        time.sleep(0.2)
    raise AssertionError(f"no new connection was served within {deadline_s:.0f} s (last outcome: {last})")


def client_round_trip(bootstrap: str, topic: str) -> None:
    """A real client works: create a topic, produce a record and read it back."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, value=b"still-served", partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                assert msg.value() == b"still-served"
                return
        raise AssertionError("the record produced was not read back within 30 s")
    finally:
        consumer.close()


# --- Riverlog's metrics -----------------------------------------------------------------------

def metric(broker, name: str, **labels: str) -> float:
    """A sample from Riverlog's /metrics (0 when the labelled sample does not exist yet)."""
    with urllib.request.urlopen(broker.metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if not (line.startswith(name + "{") or line.startswith(name + " ")):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def raise_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


# --- connections.max.idle.ms ------------------------------------------------------------------

async def _idle_connections_closed(host: str, port: int, idle_ms: int) -> tuple[int, int, bool]:
    """Open IDLE_CONNECTIONS silent connections plus one that sends a request every second; wait
    until the silent ones see EOF. Returns (EOFs, silent connections, the active one survived)."""
    opener = asyncio.Semaphore(50)

    async def open_one() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        async with opener:
            return await asyncio.open_connection(host, port)

    conns = await asyncio.gather(*(open_one() for _ in range(IDLE_CONNECTIONS)))
    stop = asyncio.Event()
    active_ok = True

    async def keep_active() -> None:
        nonlocal active_ok
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while not stop.is_set():
                writer.write(api_versions_frame())
                await writer.drain()
                size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))[0]
                await asyncio.wait_for(reader.readexactly(size), 10)
                await asyncio.sleep(min(1.0, idle_ms / 3000))
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            active_ok = False
        finally:
            writer.close()

    async def eof(reader: asyncio.StreamReader) -> bool:
        try:
            return await reader.read(1) == b""
        except ConnectionError:
            return True

    active = asyncio.create_task(keep_active())
    # Kafka closes at most one expired connection per network-thread poll (300 ms, 3 threads):
    # about 110 s for 2,000 here. Riverlog closes them all on its next check.
    try:
        results = await asyncio.wait_for(asyncio.gather(*(eof(r) for r, _ in conns)), 600)
    finally:
        stop.set()
        await active
        for _, writer in conns:
            writer.close()
    return sum(results), len(conns), active_ok


def test_idle_connections_are_closed(broker_factory, broker_target) -> None:
    raise_fd_limit(2 * IDLE_CONNECTIONS + 1000)
    idle_ms = 3000
    broker = broker_factory(overrides={"connections.max.idle.ms": idle_ms})
    host, port = broker.host, broker.port
    closed, opened, active_ok = asyncio.run(_idle_connections_closed(host, port, idle_ms))
    assert opened == IDLE_CONNECTIONS
    assert closed == IDLE_CONNECTIONS, f"only {closed} of {opened} idle connections were closed"
    assert active_ok, "a connection sending a request every second was closed as idle"
    broker.assert_alive()
    client_round_trip(broker.bootstrap, "after-idle")
    if broker_target == "riverlog":
        assert metric(broker, "riverlog_connections_closed_total", reason="idle") >= IDLE_CONNECTIONS


# --- max.connections, max.connections.per.ip ----------------------------------------------------

def test_max_connections_per_ip_refuses_the_excess(broker_factory, broker_target) -> None:
    # 0 by default, so an address without an override may not connect at all; loopback's own
    # 127.0.0.1 (the harness and the round trip below) keeps room, 127.0.0.2 gets three.
    broker = broker_factory(overrides={"max.connections.per.ip": 0,
                                       "max.connections.per.ip.overrides": "127.0.0.1:1000,127.0.0.2:3"})
    host, port = broker.host, broker.port
    held = [connect(host, port, "127.0.0.2") for _ in range(3)]
    try:
        assert [probe(s, 10) for s in held] == ["answered"] * 3
        excess = connect(host, port, "127.0.0.2")
        try:
            assert probe(excess, 10) == "closed"
        finally:
            excess.close()
        stranger = connect(host, port, "127.0.0.3")
        try:
            assert probe(stranger, 10) == "closed"
        finally:
            stranger.close()
        # The held connections are not affected, and a freed slot can be used again.
        assert probe(held[1], 10) == "answered"
        held.pop(0).close()
        wait_answered(host, port, 30, source="127.0.0.2")
    finally:
        for s in held:
            s.close()
    client_round_trip(broker.bootstrap, "after-per-ip")
    if broker_target == "riverlog":
        assert metric(broker, "riverlog_connections_refused_total", reason="max_connections_per_ip") >= 2


def test_max_connections_holds_the_excess_back(broker_factory, broker_target) -> None:
    limit = 6
    broker = broker_factory(overrides={"max.connections": limit})
    host, port = broker.host, broker.port
    held: list[socket.socket] = []
    try:
        for _ in range(limit):
            held.append(connect(host, port))
            # A connection of the readiness check may still be counted for a moment: waiting for
            # it is what the limit does, so allow the time.
            assert probe(held[-1], 20) == "answered"
        # Both brokers stop accepting at the limit (Kafka's acceptor blocks): the excess client
        # connects (the kernel's backlog), but its request is neither answered nor refused...
        excess = connect(host, port)
        try:
            assert probe(excess, 3) == "silent"
            assert not sees_eof(excess)
            # ... until a connection closes, and then it is served.
            held.pop(0).close()
            assert read_response(excess, 30) == "answered"
            assert probe(excess, 10) == "answered"
        finally:
            excess.close()
    finally:
        for s in held:
            s.close()
    wait_answered(host, port, 30)
    if broker_target == "riverlog":
        assert metric(broker, "riverlog_connections_delayed_total", reason="max_connections") >= 1


def test_max_connection_creation_rate_delays_but_serves(broker_factory, broker_target) -> None:
    broker = broker_factory(overrides={"max.connection.creation.rate": 5})
    host, port = broker.host, broker.port

    async def burst(n: int) -> list[str]:
        async def one() -> str:
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(api_versions_frame())
                await writer.drain()
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                await reader.readexactly(size)
                return "answered"
            except (asyncio.IncompleteReadError, ConnectionError):
                return "closed"
            finally:
                writer.close()
        return await asyncio.wait_for(asyncio.gather(*(one() for _ in range(n))), 120)

    # Connections beyond the rate wait to be accepted; none is refused.
    assert asyncio.run(burst(30)) == ["answered"] * 30
    if broker_target == "riverlog":
        assert metric(broker, "riverlog_connections_delayed_total", reason="max_connection_creation_rate") >= 1


# --- a request frame trickled in ----------------------------------------------------------------

def test_trickled_frame(broker_factory, broker_target) -> None:
    """A frame sent one byte per second: Riverlog closes the connection once
    socket.request.frame.timeout.ms has passed since its first byte; Kafka has no such deadline
    (the trickle counts as activity for connections.max.idle.ms) and answers the frame once
    complete, about 20 s later."""
    frame_timeout_ms = 3000
    overrides = {"socket.request.frame.timeout.ms": frame_timeout_ms} if broker_target == "riverlog" else {}
    broker = broker_factory(overrides=overrides)
    host, port = broker.host, broker.port
    frame = api_versions_frame()

    # A frame arriving in pieces well within the deadline is answered on both.
    sock = connect(host, port)
    try:
        sock.sendall(frame[:3])
        time.sleep(0.5)
        sock.sendall(frame[3:10])
        time.sleep(0.5)
        sock.sendall(frame[10:])
        assert read_response(sock, 10) == "answered"
    finally:
        sock.close()

    sock = connect(host, port)
    sent = 0
    cut_off = False
    try:
        for byte in frame:
            try:
                sock.sendall(bytes([byte]))
            except (ConnectionResetError, BrokenPipeError):
                cut_off = True
                break
            sent += 1
            time.sleep(1.0)
            if sees_eof(sock):
                cut_off = True
                break
        if broker_target == "riverlog":
            assert cut_off, "Riverlog kept waiting for a frame trickled one byte per second"
            assert sent < len(frame)
        else:
            assert not cut_off and sent == len(frame), f"Kafka closed the trickle after {sent} bytes"
            assert read_response(sock, 10) == "answered"
    finally:
        sock.close()
    wait_answered(host, port, 10)
    if broker_target == "riverlog":
        assert metric(broker, "riverlog_connections_closed_total", reason="request_frame_timeout") >= 1


# --- queued.max.request.bytes -------------------------------------------------------------------

HOARDERS = 50
FRAME_BYTES = 16 << 20  # declared by each hoarder: the largest frame socket.request.max.bytes allows
SENT_BYTES = 4 << 20  # what each hoarder actually sends of it


def hoard(host: str, port: int) -> list[socket.socket]:
    """HOARDERS connections, each declaring a FRAME_BYTES frame and sending SENT_BYTES of it (as
    far as the broker reads: a broker that stops reading leaves the rest unsent)."""
    payload = memoryview(struct.pack(">i", FRAME_BYTES - 4) + bytes(SENT_BYTES - 4))
    socks = [connect(host, port) for _ in range(HOARDERS)]
    offsets = {s: 0 for s in socks}
    for s in socks:
        s.setblocking(False)
    stalled_since = time.monotonic()
    while offsets and time.monotonic() - stalled_since < 5.0:
        _, writable, _ = select.select([], list(offsets), [], 0.5)
        for s in writable:
            try:
                n = s.send(payload[offsets[s]:offsets[s] + (1 << 20)])
            except BlockingIOError:
                continue
            stalled_since = time.monotonic()
            offsets[s] += n
            if offsets[s] >= len(payload):
                del offsets[s]
    return socks


def test_queued_max_request_bytes_bounds_memory(broker_factory, broker_target) -> None:
    broker = broker_factory(overrides={"queued.max.request.bytes": FRAME_BYTES,
                                       "socket.request.max.bytes": FRAME_BYTES})
    host, port = broker.host, broker.port
    client_round_trip(broker.bootstrap, "before-hoarding")
    baseline = rss_kib(broker.pid)
    socks = hoard(host, port)
    try:
        peak = baseline
        for _ in range(10):  # let the broker read whatever it is going to read
            time.sleep(0.3)
            peak = max(peak, rss_kib(broker.pid))
        broker.assert_alive()
        # With the pool spent, a request that arrives whole: Riverlog stops reading only the
        # connections in the middle of a frame and answers it; Kafka stops reading every
        # connection (its channel mutes once the size prefix finds no memory) and stays silent.
        fresh = connect(host, port)
        try:
            outcome = probe(fresh, 5)
        finally:
            fresh.close()
        assert outcome == ("answered" if broker_target == "riverlog" else "silent")
        peak = max(peak, rss_kib(broker.pid))
    finally:
        for s in socks:
            s.close()
    growth_mib = (peak - baseline) / 1024
    print(f"RSS baseline {baseline} KiB, peak {peak} KiB with {HOARDERS} x {SENT_BYTES >> 20} MiB sent "
          f"of {FRAME_BYTES >> 20} MiB frames")
    # Unbounded, the broker would buffer HOARDERS x SENT_BYTES = 200 MiB. With the pool, one
    # frame reserves its declared FRAME_BYTES and the others wait unread: Kafka has allocated that
    # frame whole, Riverlog holds what arrived of it plus at most one read of each waiting one.
    assert growth_mib < 128, f"RSS grew by {growth_mib:.0f} MiB with a {FRAME_BYTES >> 20} MiB request pool"
    # Once they are gone, memory is released and a normal client is served.
    client_round_trip(broker.bootstrap, "after-hoarding")
    if broker_target == "riverlog":
        # Every reservation is given back (a request still being handled, such as a consumer's
        # long poll, holds its own bytes until it is done).
        deadline = time.monotonic() + 10
        while metric(broker, "riverlog_queued_request_bytes") != 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert metric(broker, "riverlog_queued_request_bytes") == 0
