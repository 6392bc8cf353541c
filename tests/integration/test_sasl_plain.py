"""SASL PLAIN on SASL_PLAINTEXT and SASL_SSL listeners (issue #17), checked on both targets.

One broker for the module: PLAINTEXT (the harness's), ``SASL`` (SASL_PLAINTEXT) and ``SASLTLS``
(SASL_SSL), both enabling PLAIN with users from Kafka's PlainLoginModule JAAS options. Real
clients authenticate and produce and consume (confluent-kafka, kafka-python, aiokafka, Kafka's
CLI tools with ``--command-config``); the protocol-level answers are checked request by request:
a wrong password gets SASL_AUTHENTICATION_FAILED with Kafka's message and a closed connection,
an unknown mechanism UNSUPPORTED_SASL_MECHANISM with the enabled ones, and a request before
authentication a closed connection without an answer.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from riverlog.client.connection import BrokerConnection
from riverlog.client.errors import ConnectionClosedError
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode
from support.brokers import BrokerProcess
from support.certs import TestPki
from support.client_security import ClientSecurity
from support.clients import create_produce_consume
from support.java_tools import JavaTools

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300),
              pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")]

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


class Sasl:
    def __init__(self, broker: BrokerProcess, port: int, tls_port: int, pki: TestPki) -> None:
        self.broker, self.port, self.tls_port, self.pki = broker, port, tls_port, pki

    def plain(self, password: str = "alice-secret") -> tuple[str, ClientSecurity]:
        return f"localhost:{self.port}", ClientSecurity("SASL_PLAINTEXT", mechanism="PLAIN", username="alice",
                                                         password=password)

    def over_tls(self) -> tuple[str, ClientSecurity]:
        return f"localhost:{self.tls_port}", ClientSecurity("SASL_SSL", ca=self.pki.truststore, mechanism="PLAIN",
                                                             username="alice", password="alice-secret")


@pytest.fixture(scope="module")
def sasl(module_broker_factory, tmp_path_factory) -> Sasl:
    pki = TestPki.create(tmp_path_factory.mktemp("pki"))
    settings: dict[str, str] = {}
    for name in ("sasl", "sasltls"):
        settings[f"listener.name.{name}.sasl.enabled.mechanisms"] = "PLAIN"
        settings[f"listener.name.{name}.plain.sasl.jaas.config"] = JAAS
    settings.update({"listener.name.sasltls.ssl.keystore.type": "PEM",
                     "listener.name.sasltls.ssl.keystore.location": str(pki.broker_keystore)})
    broker: BrokerProcess = module_broker_factory(start=False, overrides=settings)
    port = broker.add_listener("SASL", "SASL_PLAINTEXT", advertised_host="localhost")
    tls_port = broker.add_listener("SASLTLS", "SASL_SSL", advertised_host="localhost")
    broker.start()
    return Sasl(broker, port, tls_port, pki)


def roundtrip(bootstrap: str, security: ClientSecurity, topic: str) -> None:
    create_produce_consume(bootstrap, security.librdkafka(), topic)


def test_confluent_kafka_over_sasl_plaintext(sasl: Sasl) -> None:
    roundtrip(*sasl.plain(), "plain-librdkafka")


def test_confluent_kafka_over_sasl_ssl(sasl: Sasl) -> None:
    roundtrip(*sasl.over_tls(), "plain-over-tls")


def test_kafka_python_and_aiokafka(sasl: Sasl) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    bootstrap, security = sasl.plain()
    producer = KafkaProducer(bootstrap_servers=bootstrap, **security.kafka_python())
    producer.send("plain-python", b"from-kafka-python").get(timeout=30)
    producer.close()

    async def aio() -> None:
        from aiokafka import AIOKafkaProducer

        aio_producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **security.aiokafka())
        await aio_producer.start()
        try:
            await aio_producer.send_and_wait("plain-python", b"from-aiokafka")
        finally:
            await aio_producer.stop()

    asyncio.run(aio())
    consumer = KafkaConsumer("plain-python", bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=15000, **security.kafka_python())
    values = sorted(m.value for m in consumer)
    consumer.close()
    assert values == [b"from-aiokafka", b"from-kafka-python"]


def test_kafka_cli_tools_with_command_config(sasl: Sasl, java_tools: JavaTools, tmp_path: Path) -> None:
    bootstrap, security = sasl.over_tls()
    config = security.write_java_properties(tmp_path / "client.properties")
    lines = [f"line-{i}" for i in range(10)]
    assert java_tools.roundtrip_with_config(bootstrap, config, "plain-cli", lines) == lines


def test_a_wrong_password_is_refused_with_kafka_s_error(sasl: Sasl) -> None:
    bootstrap, security = sasl.plain(password="wrong")
    producer = Producer({"bootstrap.servers": bootstrap, **security.librdkafka(), "message.timeout.ms": 5000})
    errors: list[KafkaError] = []
    producer.produce("never", b"x", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(15)
    assert errors and errors[0] is not None  # the client gives up: it never authenticated

    async def on_the_wire() -> None:
        conn = await BrokerConnection.connect("127.0.0.1", sasl.port)
        try:
            handshake = await conn.request(ApiKey.SASL_HANDSHAKE, {"mechanism": "PLAIN"}, 1)
            assert handshake["error_code"] == ErrorCode.NONE and handshake["mechanisms"] == ["PLAIN"]
            answer = await conn.request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": b"\0alice\0wrong"}, 2)
            assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert "Authentication failed" in answer["error_message"]
            with pytest.raises((ConnectionClosedError, KafkaException, OSError)):
                await conn.request(ApiKey.METADATA, {"topics": []}, 12, timeout=10)
        finally:
            await conn.close()

    asyncio.run(on_the_wire())


def test_an_unknown_mechanism_is_refused_with_the_enabled_ones(sasl: Sasl) -> None:
    async def scenario() -> None:
        conn = await BrokerConnection.connect("127.0.0.1", sasl.port)
        try:
            answer = await conn.request(ApiKey.SASL_HANDSHAKE, {"mechanism": "SCRAM-SHA-512"}, 1)
            assert answer["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
            assert answer["mechanisms"] == ["PLAIN"]
        finally:
            await conn.close()

    asyncio.run(scenario())


def test_requests_before_authentication_never_reach_a_handler(sasl: Sasl) -> None:
    async def scenario() -> None:
        conn = await BrokerConnection.connect("127.0.0.1", sasl.port)  # ApiVersions is allowed
        try:
            with pytest.raises((ConnectionClosedError, OSError)):
                await conn.request(ApiKey.METADATA, {"topics": None}, 12, timeout=10)
        finally:
            await conn.close()

    asyncio.run(scenario())
    # The broker is fine and still serves authenticated clients.
    roundtrip(*sasl.plain(), "after-unauthenticated")
