"""Hostile input before authentication (issue #17, acceptance 5), on both targets.

One broker for the module with a SASL_PLAINTEXT listener (PLAIN and SCRAM-SHA-512) and an SSL
listener. Two checks:

- Every API key the codec knows, sent (well formed) before authenticating, ends the connection
  with no answer; only ApiVersions, SaslHandshake and SaslAuthenticate are served before a login,
  as in Kafka. On Riverlog the broker's metrics also show that no such request reached a handler
  (each counted as refused "unauthenticated", none as handled).
- A seeded stream of malformed input (``RIVERLOG_AUTH_FUZZ_CASES``, default 1,500;
  ``RIVERLOG_AUTH_FUZZ_SEED``): SaslHandshake and SaslAuthenticate frames with mutated bodies,
  random and oversized tokens for PLAIN and for both SCRAM steps, exchanges out of order, raw
  garbage on the SASL port, and on the TLS port random bytes, mutated or truncated ClientHellos and
  garbage after a completed handshake. Each case gets an answer or a closed connection (a frame
  announced longer than what was sent may also be waited for; the case then ends by timeout), and
  afterwards the broker is alive, an authenticated client produces and consumes, and (Riverlog)
  its log holds no traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import ssl
import struct
import urllib.request
from collections.abc import Callable

import pytest
from riverlog.client.connection import BrokerConnection
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.messages import MESSAGES
from support.brokers import BrokerProcess, selected_target
from support.certs import TestPki
from support.client_security import ClientSecurity
from support.clients import create_produce_consume
from support.fuzz import encode_request, sample_seeds

SEED = int(os.environ.get("RIVERLOG_AUTH_FUZZ_SEED", "20261126"))
CASES = int(os.environ.get("RIVERLOG_AUTH_FUZZ_CASES", "1500"))
# About 75 cases a second on two cores; the bound leaves room for a slower machine.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300 + CASES // 20)]
CONCURRENCY = 24
CASE_TIMEOUT_S = 2.0
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
PRE_AUTHENTICATION = {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}


class Target:
    def __init__(self, broker: BrokerProcess, sasl_port: int, tls_port: int, pki: TestPki) -> None:
        self.broker, self.sasl_port, self.tls_port, self.pki = broker, sasl_port, tls_port, pki


@pytest.fixture(scope="module")
def target(module_broker_factory, tmp_path_factory) -> Target:
    pki = TestPki.create(tmp_path_factory.mktemp("pki"))
    broker: BrokerProcess = module_broker_factory(start=False, overrides={
        "listener.name.sasl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl.scram-sha-512.sasl.jaas.config": SCRAM_LOGIN,
        "listener.name.tls.ssl.keystore.type": "PEM",
        "listener.name.tls.ssl.keystore.location": str(pki.broker_keystore)})
    sasl_port = broker.add_listener("SASL", "SASL_PLAINTEXT", advertised_host="localhost")
    tls_port = broker.add_listener("TLS", "SSL", advertised_host="localhost")
    broker.start()
    return Target(broker, sasl_port, tls_port, pki)


async def exchange(port: int, frames: list[bytes], *, context: ssl.SSLContext | None = None,
                   timeout: float = CASE_TIMEOUT_S) -> tuple[bytes, bool]:
    """Send the frames (after a TLS handshake if ``context``), read until the broker closes or the
    timeout passes: (what was read, whether the broker closed)."""
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, ssl=context,
                                    server_hostname="localhost" if context else None), timeout)
    except (ssl.SSLError, ConnectionError, TimeoutError):
        return b"", True  # refused during the handshake: closed
    received = b""
    closed = False
    try:
        for frame in frames:
            writer.write(frame)
        await writer.drain()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (left := deadline - loop.time()) > 0:
            chunk = await asyncio.wait_for(reader.read(65536), left)
            if not chunk:
                closed = True
                break
            received += chunk
    except TimeoutError:
        pass
    except (ConnectionError, ssl.SSLError, OSError):
        closed = True
    finally:
        writer.close()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(writer.wait_closed(), 1)
    return received, closed


def metric_values(broker: BrokerProcess, name: str) -> dict[str, float]:
    """``{api label: value}`` of one of Riverlog's request counters."""
    url = broker.metrics_url
    assert url is not None
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, _, value = line.rpartition(" ")
            api = labels.split('api="', 1)[1].split('"', 1)[0]
            out[api] = float(value)
    return out


async def broker_versions(port: int) -> dict[int, tuple[int, int]]:
    conn = await BrokerConnection.connect("127.0.0.1", port)  # ApiVersions is served before a login
    try:
        return conn.broker_versions
    finally:
        await conn.close()


def roundtrip(port: int, topic: str) -> None:
    security = ClientSecurity("SASL_PLAINTEXT", mechanism="PLAIN", username="alice", password="alice-secret")
    create_produce_consume(f"localhost:{port}", security.librdkafka(), topic)


def test_every_api_before_authentication_closes_the_connection(target: Target) -> None:
    ranges = asyncio.run(broker_versions(target.sasl_port))
    samples: dict[int, tuple[int, dict[str, object]]] = {}
    for key, version, body in sample_seeds():
        low, high = ranges.get(key, MESSAGES[key][0].valid)
        if key not in PRE_AUTHENTICATION and low <= version <= high:
            samples[key] = (version, body)  # the highest version both sides know
    # Every API key of the codec; a key the broker does not serve is sent at our own version.
    assert set(samples) == set(MESSAGES) - PRE_AUTHENTICATION

    async def run_all() -> dict[int, tuple[bytes, bool]]:
        results = await asyncio.gather(*(exchange(target.sasl_port, [encode_request(k, v, b, 7)])
                                         for k, (v, b) in sorted(samples.items())))
        return dict(zip(sorted(samples), results, strict=True))

    riverlog = selected_target() == "riverlog"
    before = metric_values(target.broker, "riverlog_request_errors_total") if riverlog else {}
    handled_before = metric_values(target.broker, "riverlog_requests_total") if riverlog else {}
    answered = {key: received for key, (received, closed) in asyncio.run(run_all()).items()
                if received or not closed}
    assert answered == {}, f"answered or left open before authentication: {sorted(answered)}"
    if riverlog:
        handled = metric_values(target.broker, "riverlog_requests_total")
        assert handled == {**handled_before, "ApiVersions": handled["ApiVersions"]}, (handled_before, handled)
        refused = metric_values(target.broker, "riverlog_request_errors_total").get("unauthenticated", 0)
        assert refused - before.get("unauthenticated", 0) == len(samples)


# --- the seeded malformed-input stream ------------------------------------------------------


def _frame(api_key: int, version: int, body: dict[str, object], correlation_id: int = 1) -> bytes:
    return encode_request(api_key, version, body, correlation_id)


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    for _ in range(rng.randint(1, 8)):
        choice = rng.random()
        pos = rng.randrange(4, len(data)) if len(data) > 4 else 4
        if choice < 0.5 and pos < len(data):
            data[pos] ^= 1 << rng.randrange(8)
        elif choice < 0.7 and pos + 2 <= len(data):
            struct.pack_into(">h", data, pos, rng.choice([-1, 0x7FFF, -0x8000, rng.randrange(-5, 300)]))
        elif choice < 0.85:
            del data[pos:pos + rng.randint(1, 16)]
        else:
            data[pos:pos] = rng.randbytes(rng.randint(1, 64))
    if rng.random() < 0.7:  # usually keep the size prefix honest, so the mutation reaches the decoder
        struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


def _token(rng: random.Random) -> bytes:
    kind = rng.random()
    if kind < 0.3:
        return rng.randbytes(rng.randint(0, 512))
    if kind < 0.45:
        return rng.randbytes(rng.randint(60_000, 200_000))  # oversized tokens
    if kind < 0.65:  # PLAIN-shaped: separators in odd places, long or empty names
        parts = [rng.choice([b"", b"alice", b"a" * rng.randint(1, 5000), rng.randbytes(8)])
                 for _ in range(rng.randint(1, 5))]
        return b"\0".join(parts)
    if kind < 0.85:  # SCRAM client-first-shaped
        return rng.choice([b"n,,n=alice,r=", b"p=tls-unique,,n=x,r=y", b"n,a=bob,n=alice,r=abc", b"y,,n=,r=1",
                           b"n,,n=al=ice,r=" + rng.randbytes(16), b"n,,n=alice,r=abc,m=ext"])
    return rng.choice([b"c=biws,r=abc,p=AAAA", b"c=biws,r=,p=", b"c=Zm9v,r=x,p=!!!!", b"v=AAAA"])


def sasl_case(rng: random.Random) -> list[bytes]:
    mechanism = rng.choice(["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256", "GSSAPI", "", "x" * 300])
    handshake = _frame(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
    authenticate = _frame(ApiKey.SASL_AUTHENTICATE, rng.randint(0, 2), {"auth_bytes": _token(rng)}, 2)
    kind = rng.randrange(7)
    if kind == 0:
        return [_mutate(rng, handshake)]
    if kind == 1:
        return [handshake, authenticate]
    if kind == 2:
        return [handshake, _mutate(rng, authenticate)]
    if kind == 3:  # out of order: authenticate first, or two handshakes, or a request mid-exchange
        return rng.choice([[authenticate], [handshake, handshake],
                           [handshake, _frame(ApiKey.METADATA, 12, {"topics": None}, 3)]])
    if kind == 4:
        first = _frame(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"n,,n=alice,r=" + rng.randbytes(12)}, 2)
        return [_frame(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"}), first, authenticate]
    if kind == 5:  # garbage, or a frame announcing more than is sent
        return [rng.randbytes(rng.randint(1, 2048))] if rng.random() < 0.5 else \
            [struct.pack(">i", rng.randint(8, 1 << 20)) + rng.randbytes(rng.randint(0, 64))]
    return [_frame(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": mechanism}), _token(rng)]  # v0's bare tokens


def client_hello() -> bytes:
    """The first flight of a real TLS client, to mutate."""
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def tls_case(rng: random.Random, hello: bytes) -> tuple[list[bytes], bool]:
    """(bytes to send, whether to complete a real handshake first)."""
    kind = rng.randrange(4)
    if kind == 0:
        return [rng.randbytes(rng.randint(1, 4096))], False
    if kind == 1:
        return [hello[:rng.randint(1, len(hello) - 1)]], False
    if kind == 2:
        return [_mutate(rng, hello)], False
    return [rng.randbytes(rng.randint(1, 4096))], True  # garbage inside an established session


def test_seeded_malformed_sasl_and_tls_input_never_crashes_the_broker(target: Target) -> None:
    riverlog = selected_target() == "riverlog"
    handled_before = metric_values(target.broker, "riverlog_requests_total") if riverlog else {}
    rng = random.Random(SEED)
    hello = client_hello()
    trusting = ssl.create_default_context(cafile=str(target.pki.truststore))
    plans: list[Callable[[], object]] = []
    for _ in range(CASES):
        if rng.random() < 0.7:
            frames = sasl_case(rng)
            plans.append(lambda frames=frames: exchange(target.sasl_port, frames))
        else:
            frames, handshake = tls_case(rng, hello)
            plans.append(lambda frames=frames, handshake=handshake: exchange(
                target.tls_port, frames, context=trusting if handshake else None))

    async def run_all() -> None:
        slots = asyncio.Semaphore(CONCURRENCY)

        async def one(plan: Callable[[], object]) -> None:
            async with slots:
                await plan()  # type: ignore[misc]

        await asyncio.gather(*(one(p) for p in plans))

    asyncio.run(run_all())
    target.broker.assert_alive()
    if riverlog:
        log = target.broker.log_path.read_text(errors="replace")
        assert "Traceback" not in log, target.broker.log_tail(60)
        # No login succeeded, so nothing but the pre-authentication APIs reached a handler.
        handled = metric_values(target.broker, "riverlog_requests_total")
        grew = {api for api, n in handled.items() if n > handled_before.get(api, 0)}
        assert grew <= {"ApiVersions", "SaslHandshake", "SaslAuthenticate"}, (handled_before, handled)
    roundtrip(target.sasl_port, "after-auth-fuzz")
