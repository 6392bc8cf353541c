"""SASL SCRAM with credentials in the metadata log (issue #17), checked on both targets.

Users are created the way Kafka's operators create them, with ``kafka-configs --alter
--entity-type users --add-config 'SCRAM-SHA-512=[password=...]'`` (AlterUserScramCredentials,
decided by the controller), then log in over SASL_PLAINTEXT with librdkafka and Kafka's own CLI
tools. Described with the Admin API and with ``kafka-configs --describe`` (which asks for client
quotas too); a wrong password and a deleted user are refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from support.brokers import BrokerProcess
from support.client_security import ClientSecurity
from support.clients import group_values, wait_until
from support.java_tools import JavaTools

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


class Scram:
    def __init__(self, broker: BrokerProcess, port: int) -> None:
        self.broker, self.port = broker, port
        self.bootstrap = f"localhost:{port}"

    def login(self, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> ClientSecurity:
        return ClientSecurity("SASL_PLAINTEXT", mechanism=mechanism, username=user, password=password)


@pytest.fixture(scope="module")
def scram(module_broker_factory) -> Scram:
    # Kafka wants a (bare) ScramLoginModule entry per SCRAM mechanism of a listener; Riverlog
    # reads the same keys and needs nothing in them.
    scram_login = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    broker: BrokerProcess = module_broker_factory(start=False, overrides={
        "listener.name.sasl.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl.scram-sha-256.sasl.jaas.config": scram_login,
        "listener.name.sasl.scram-sha-512.sasl.jaas.config": scram_login})
    port = broker.add_listener("SASL", "SASL_PLAINTEXT", advertised_host="localhost")
    broker.start()
    return Scram(broker, port)


def can_produce(bootstrap: str, security: ClientSecurity, topic: str) -> bool:
    errors: list[object] = []
    # An authentication failure is a client-level error: collected here rather than left to
    # confluent-kafka's default reporting (which leaves a pending exception behind on failure).
    producer = Producer({"bootstrap.servers": bootstrap, **security.librdkafka(), "message.timeout.ms": 5000,
                         "error_cb": errors.append})
    producer.produce(topic, b"probe", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(10)
    return errors == [None]  # one delivery report, no error


def add_user(java_tools: JavaTools, scram: Scram, user: str, mechanism: str, password: str) -> None:
    java_tools.configs(scram.broker.bootstrap, "--alter", "--entity-type", "users", "--entity-name", user,
                       "--add-config", f"{mechanism}=[iterations=8192,password={password}]")


def test_a_user_made_with_kafka_configs_logs_in(scram: Scram, java_tools: JavaTools, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": scram.broker.bootstrap})
    admin.create_topics([NewTopic("scram-topic", 1, 1)])["scram-topic"].result(30)
    add_user(java_tools, scram, "alice", "SCRAM-SHA-512", "alice-secret")
    alice = scram.login("alice", "alice-secret")
    # The credential reaches every broker through the metadata log: wait until this one has it.
    wait_until(lambda: can_produce(scram.bootstrap, alice, "scram-topic"), timeout=30,
               message="alice can log in with SCRAM-SHA-512")
    assert group_values({"bootstrap.servers": scram.bootstrap, **alice.librdkafka()}, "scram-topic",
                        "scram-group", 1) == [b"probe"]
    config = alice.write_java_properties(tmp_path / "alice.properties")
    lines = [f"line-{i}" for i in range(5)]
    assert java_tools.roundtrip_with_config(scram.bootstrap, config, "scram-cli", lines) == lines


def test_the_admin_api_describes_credentials_without_secrets(scram: Scram, java_tools: JavaTools) -> None:
    add_user(java_tools, scram, "bob", "SCRAM-SHA-256", "bob-secret")
    admin = AdminClient({"bootstrap.servers": scram.broker.bootstrap})

    def bob() -> list[tuple[str, int]] | None:
        try:
            described = admin.describe_user_scram_credentials(["bob"])["bob"].result(10)
        except Exception:
            return None
        return [(str(info.mechanism), info.iterations) for info in described.scram_credential_infos]

    found = wait_until(bob, timeout=30, message="bob's credential described")
    assert found == [("ScramMechanism.SCRAM_SHA_256", 8192)]
    described = java_tools.configs(scram.broker.bootstrap, "--describe", "--entity-type", "users",
                                   "--entity-name", "bob").stdout
    assert "SCRAM-SHA-256=iterations=8192" in described and "bob-secret" not in described
    wait_until(lambda: can_produce(scram.bootstrap, scram.login("bob", "bob-secret", "SCRAM-SHA-256"), "bob-topic"),
               timeout=30, message="bob logs in with SCRAM-SHA-256")


def test_wrong_passwords_and_deleted_users_are_refused(scram: Scram, java_tools: JavaTools) -> None:
    add_user(java_tools, scram, "carol", "SCRAM-SHA-512", "carol-secret")
    carol = scram.login("carol", "carol-secret")
    wait_until(lambda: can_produce(scram.bootstrap, carol, "carol-topic"), timeout=30, message="carol logs in")
    assert not can_produce(scram.bootstrap, scram.login("carol", "wrong"), "carol-topic")
    assert not can_produce(scram.bootstrap, scram.login("nobody", "carol-secret"), "carol-topic")
    java_tools.configs(scram.broker.bootstrap, "--alter", "--entity-type", "users", "--entity-name", "carol",
                       "--delete-config", "SCRAM-SHA-512")
    wait_until(lambda: not can_produce(scram.bootstrap, carol, "carol-topic"), timeout=30,
               message="carol refused once her credential is deleted")


def test_bootstrap_credentials_exist_before_any_client_connects(broker_factory, broker_target) -> None:
    if broker_target != "riverlog":
        pytest.fail("bootstrap.scram.credentials is Riverlog's start-time form of Kafka's "
                    "'kafka-storage format --add-scram'; run this test against Riverlog")
    broker: BrokerProcess = broker_factory(start=False, overrides={
        "listener.name.sasl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "bootstrap.scram.credentials": "SCRAM-SHA-512=[name=admin,password=admin-secret]"})
    port = broker.add_listener("SASL", "SASL_PLAINTEXT", advertised_host="localhost")
    broker.start()
    admin = ClientSecurity("SASL_PLAINTEXT", mechanism="SCRAM-SHA-512", username="admin", password="admin-secret")
    wait_until(lambda: can_produce(f"localhost:{port}", admin, "first-topic"), timeout=30,
               message="the bootstrap user logs in")
    assert "recorded bootstrap SCRAM credentials for admin (SCRAM-SHA-512)" in broker.log_path.read_text()
    broker_lines = [line for line in broker.log_path.read_text().splitlines() if not line.startswith("=====")]
    assert not any("admin-secret" in line for line in broker_lines)  # (the harness echoes its command)
    # A restart records nothing again: the credential exists.
    broker.restart()
    wait_until(lambda: can_produce(f"localhost:{port}", admin, "first-topic"), timeout=30,
               message="the bootstrap user logs in after a restart")
    assert broker.log_path.read_text().count("recorded bootstrap SCRAM credentials") == 1
