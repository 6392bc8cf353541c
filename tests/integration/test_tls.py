"""TLS listeners (issue #17): what Kafka's SSL listeners do, checked on both targets.

One broker for the module with three listeners: PLAINTEXT (the harness's), ``MTLS`` (SSL,
``ssl.client.auth=required``) and ``TLS`` (SSL, server authentication only, its key encrypted
with ``ssl.key.password``). The clients beyond the client matrix's (which covers kafka-python,
confluent-kafka, aiokafka and kcat over mutual TLS): Kafka's own CLI tools with
``--command-config``. Then the refusals: plaintext spoken to a TLS port, a client certificate
from a CA the broker does not trust, an expired one, and no certificate where one is required
all end in a closed connection, and the broker keeps serving.

The certificate reload test is Riverlog's own (Kafka reloads keystores through AlterConfigs, not
from the files), so it runs on a Riverlog broker of its own.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from support.brokers import BrokerProcess
from support.certs import Authority, TestPki, pem_cert, pem_key
from support.client_security import ClientSecurity
from support.clients import wait_until
from support.java_tools import JavaTools

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

KEY_PASSWORD = "key-secret"


def listener_settings(name: str, pki: TestPki, **extra: str) -> dict[str, str]:
    prefix = f"listener.name.{name.lower()}."
    settings = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker_keystore),
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.truststore), **extra}
    return {prefix + key: value for key, value in settings.items()}


class Secured:
    def __init__(self, broker: BrokerProcess, pki: TestPki, mtls_port: int, tls_port: int) -> None:
        self.broker, self.pki, self.mtls_port, self.tls_port = broker, pki, mtls_port, tls_port
        client = pki.client("tls-client")
        self.mtls = ClientSecurity("SSL", ca=pki.truststore, cert=client.cert, key=client.key,
                                   keystore=client.keystore)
        self.tls = ClientSecurity("SSL", ca=pki.truststore)


@pytest.fixture(scope="module")
def secured(module_broker_factory, tmp_path_factory) -> Secured:
    pki = TestPki.create(tmp_path_factory.mktemp("pki"))
    # The TLS listener's key is encrypted: its own keystore file, read with ssl.key.password.
    key, cert = pki.ca.issue("broker-tls", server=True)
    encrypted = pki.directory / "broker-encrypted.pem"
    encrypted.write_bytes(pem_key(key, KEY_PASSWORD) + pem_cert(cert) + pem_cert(pki.ca.cert))
    broker: BrokerProcess = module_broker_factory(start=False, overrides={
        **listener_settings("MTLS", pki, **{"ssl.client.auth": "required"}),
        **listener_settings("TLS", pki, **{"ssl.keystore.location": str(encrypted),
                                           "ssl.key.password": KEY_PASSWORD}),
    })
    mtls_port = broker.add_listener("MTLS", "SSL", advertised_host="localhost")
    tls_port = broker.add_listener("TLS", "SSL", advertised_host="localhost")
    broker.start()
    return Secured(broker, pki, mtls_port, tls_port)


def roundtrip(bootstrap: str, security: ClientSecurity, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **security.librdkafka()})
    meta = admin.list_topics(timeout=15)
    host, port = bootstrap.rsplit(":", 1)
    assert [(b.host, b.port) for b in meta.brokers.values()] == [(host, int(port))]
    producer = Producer({"bootstrap.servers": bootstrap, **security.librdkafka()})
    for i in range(5):
        producer.produce(topic, f"{topic}-{i}".encode())
    assert producer.flush(30) == 0


def test_server_authenticated_tls_with_an_encrypted_key(secured: Secured) -> None:
    roundtrip(f"localhost:{secured.tls_port}", secured.tls, "tls-server-only")


def test_kafka_cli_tools_over_mutual_tls(secured: Secured, java_tools: JavaTools, tmp_path: Path) -> None:
    config = secured.mtls.write_java_properties(tmp_path / "client.properties")
    lines = [f"line-{i}" for i in range(20)]
    assert java_tools.roundtrip_with_config(f"localhost:{secured.mtls_port}", config, "cli-tls", lines) == lines


def _api_versions_request() -> bytes:
    body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"  # ApiVersions v0, correlation 1, client "test"
    return struct.pack(">i", len(body)) + body


def test_plaintext_spoken_to_a_tls_port_is_closed(secured: Secured) -> None:
    with socket.create_connection(("127.0.0.1", secured.mtls_port), timeout=10) as sock:
        sock.sendall(_api_versions_request())
        received = b""
        while chunk := sock.recv(4096):
            received += chunk
    # Whatever came back (at most a TLS alert) is no Kafka response: a TLS record starts with a
    # content type of 20-24, never a Kafka size prefix answering correlation id 1.
    assert received == b"" or received[0] in range(20, 25), received[:16]
    roundtrip(f"localhost:{secured.tls_port}", secured.tls, "after-plaintext")


def _tls_request(port: int, context: ssl.SSLContext) -> bytes:
    """Handshake, send ApiVersions, read until the broker closes or answers; what was read."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as sock:
        sock.sendall(_api_versions_request())
        return sock.recv(4096)


def client_context(secured: Secured, cert: Path | None, key: Path | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(secured.pki.truststore))
    if cert and key:
        context.load_cert_chain(str(cert), str(key))
    return context


def test_a_trusted_client_certificate_is_served(secured: Secured) -> None:
    assert secured.mtls.cert is not None
    answer = _tls_request(secured.mtls_port, client_context(secured, secured.mtls.cert, secured.mtls.key))
    size, correlation = struct.unpack(">ii", answer[:8])
    assert correlation == 1 and size > 4


@pytest.mark.parametrize("which", ["untrusted", "expired", "missing"])
def test_a_bad_client_certificate_is_refused(secured: Secured, which: str) -> None:
    if which == "untrusted":
        files = secured.pki.client("stranger", authority=Authority.create("Someone Else's CA"))
        cert, key = files.cert, files.key
    elif which == "expired":
        files = secured.pki.client("late", expired=True)
        cert, key = files.cert, files.key
    else:
        cert = key = None
    refused = False
    try:
        answer = _tls_request(secured.mtls_port, client_context(secured, cert, key))
        refused = answer == b""  # TLS 1.3: the refusal arrives after the client's handshake ends
    except (ssl.SSLError, ConnectionError):
        refused = True
    assert refused
    roundtrip(f"localhost:{secured.mtls_port}", secured.mtls, f"after-{which}")


def test_rotated_certificates_are_picked_up_without_a_restart(broker_factory, broker_target, tmp_path) -> None:
    if broker_target != "riverlog":
        pytest.fail("Riverlog reloads certificate files by itself; Kafka needs AlterConfigs for it")
    pki = TestPki.create(tmp_path / "pki")
    broker: BrokerProcess = broker_factory(start=False, overrides={
        **listener_settings("TLS", pki), "ssl.file.reload.interval.ms": "200"})
    port = broker.add_listener("TLS", "SSL", advertised_host="localhost")
    broker.start()

    def served_common_name() -> str:
        context = ssl.create_default_context(cafile=str(pki.truststore))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                context.wrap_socket(raw, server_hostname="localhost") as sock:
            cert = sock.getpeercert()
        return dict(item for rdn in cert["subject"] for item in rdn)["commonName"]

    assert served_common_name() == "broker"
    # A new certificate from the same CA, written the way Kubernetes updates a mounted Secret
    # (a new file renamed over the old one).
    staged = pki.directory / "broker.pem.new"
    key, cert = pki.ca.issue("broker-rotated", server=True)
    staged.write_bytes(pem_key(key) + pem_cert(cert) + pem_cert(pki.ca.cert))
    staged.replace(pki.broker_keystore)
    wait_until(lambda: served_common_name() == "broker-rotated", timeout=30,
               message="the rotated certificate served")
    roundtrip(f"localhost:{port}", ClientSecurity("SSL", ca=pki.truststore), "after-rotation")
    assert "TLS key, certificate or truststore reloaded" in broker.log_path.read_text()
    time.sleep(0.5)
    broker.assert_alive()
