"""W1 and W3 over SASL_SSL (issue #17): the same single broker, with a second listener that speaks
SASL_SSL (SCRAM-SHA-512, a certificate from a CA made for the run), and clients that log in on
it as a SCRAM user made through the Admin API over the plaintext listener. Both systems get the
same listener, the same certificate and the same user; nothing else changes, so the ratio against
the plaintext W1 and W3 of the same run is what TLS and SASL cost."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from support.certs import TestPki
from support.client_security import ClientSecurity

from harness import clients, systems

USER, PASSWORD = "bench", "bench-secret"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


@dataclass(frozen=True)
class SecuredBroker:
    broker: object  # support.brokers.BrokerProcess
    bootstrap: str  # the SASL_SSL listener
    plaintext: str  # the harness's own listener, for setup
    conf: dict[str, str]  # librdkafka settings for the SASL_SSL listener
    java_config: Path  # the same for Kafka's Java tools (--command-config)


@contextlib.contextmanager
def secured_single_broker(system: str, workdir: Path) -> Iterator[SecuredBroker]:
    pki = TestPki.create(workdir / "pki")
    broker = systems.new_broker(system, workdir, {
        "listener.name.secure.ssl.keystore.type": "PEM",
        "listener.name.secure.ssl.keystore.location": str(pki.broker_keystore),
        "listener.name.secure.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.secure.scram-sha-512.sasl.jaas.config": SCRAM_LOGIN,
    })
    port = broker.add_listener("SECURE", "SASL_SSL", advertised_host="localhost")
    try:
        broker.start(timeout=systems.START_TIMEOUT)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 2})
        upsert = UserScramCredentialUpsertion(USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                              PASSWORD.encode())
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(60)
        security = ClientSecurity("SASL_SSL", ca=pki.truststore, mechanism="SCRAM-SHA-512", username=USER,
                                  password=PASSWORD)
        secured = SecuredBroker(broker, f"localhost:{port}", broker.bootstrap, security.librdkafka(),
                                security.write_java_properties(workdir / "client.properties"))
        # The credential reaches the listener through the metadata log: wait until a login works.
        clients.wait_for_login(secured.bootstrap, secured.conf, timeout=60)
        yield secured
    finally:
        broker.kill()
        broker.close()
