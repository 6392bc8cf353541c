"""Re-authentication (KIP-368, issue #17) with real clients, on both targets.

The SCRAM listener gives sessions a lifetime (``connections.max.reauth.ms``, 2 s here); a broker
closes a connection whose session ran out, unless the client authenticated again on it. Clients
that implement KIP-368 (librdkafka, and Riverlog's own client) keep working for several lifetimes
on the connection they opened: librdkafka's statistics show one connect to the broker, Riverlog's
client keeps its one connection open while requests succeed before and after every expiry.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from riverlog.client.connection import BrokerConnection
from riverlog.protocol.api_keys import ApiKey
from riverlog.security.client_config import ClientSecurity as RiverlogSecurity
from support.brokers import BrokerProcess
from support.client_security import ClientSecurity
from support.clients import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

LIFETIME_MS = 2000
USER, PASSWORD = "renewer", "renewer-secret"


@pytest.fixture(scope="module")
def listener(module_broker_factory) -> tuple[BrokerProcess, int]:
    broker: BrokerProcess = module_broker_factory(start=False, overrides={
        "listener.name.sasl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl.scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "listener.name.sasl.connections.max.reauth.ms": str(LIFETIME_MS)})
    port = broker.add_listener("SASL", "SASL_PLAINTEXT", advertised_host="localhost")
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    upsert = UserScramCredentialUpsertion(USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          PASSWORD.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    admin.create_topics([NewTopic("renewed", 1, 1)])["renewed"].result(30)
    return broker, port


def test_librdkafka_re_authenticates_on_its_connection(listener: tuple[BrokerProcess, int]) -> None:
    _, port = listener
    security = ClientSecurity("SASL_PLAINTEXT", mechanism="SCRAM-SHA-512", username=USER, password=PASSWORD)
    stats: list[dict[str, object]] = []
    errors: list[object] = []
    conf = {"bootstrap.servers": f"localhost:{port}", **security.librdkafka(), "linger.ms": 0,
            "statistics.interval.ms": 500, "stats_cb": lambda raw: stats.append(json.loads(raw)),
            "error_cb": errors.append}

    def logs_in() -> bool:
        probe = Producer({k: v for k, v in conf.items() if k not in ("stats_cb", "statistics.interval.ms")})
        probe.produce("renewed", b"probe")
        return probe.flush(10) == 0

    wait_until(logs_in, timeout=30, message="the SCRAM user logs in")  # its record reached the listener
    producer = Producer(conf)
    delivered: list[object] = []
    deadline = time.monotonic() + 3.5 * LIFETIME_MS / 1000
    while time.monotonic() < deadline:  # a request every 200 ms, through three session lifetimes
        producer.produce("renewed", b"x", on_delivery=lambda err, _msg: delivered.append(err))
        producer.poll(0.2)
    assert producer.flush(30) == 0
    producer.poll(1.0)  # one more statistics report
    assert delivered and all(err is None for err in delivered), delivered
    brokers = stats[-1]["brokers"]
    assert isinstance(brokers, dict)
    node = next(b for b in brokers.values() if b["nodeid"] == 1)
    # Every record went over the one connection: re-authenticated, never closed by the broker.
    assert node["connects"] == 1 and node["disconnects"] == 0, node
    assert not errors, errors


def test_riverlog_client_re_authenticates_on_its_connection(listener: tuple[BrokerProcess, int]) -> None:
    _, port = listener
    security = RiverlogSecurity(protocol="SASL_PLAINTEXT", mechanism="SCRAM-SHA-512", username=USER,
                                password=PASSWORD)

    async def scenario() -> None:
        conn = await BrokerConnection.connect("localhost", port, security=security)
        try:
            deadline = time.monotonic() + 3.5 * LIFETIME_MS / 1000
            answered = 0
            while time.monotonic() < deadline:
                response = await conn.request(ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False})
                assert response["brokers"]
                answered += 1
                await asyncio.sleep(0.2)
            assert not conn.closed and answered >= 10
        finally:
            await conn.close()

    asyncio.run(scenario())
