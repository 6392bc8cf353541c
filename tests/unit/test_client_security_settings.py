"""The client's side of TLS and SASL (issue #17): Kafka's client properties, a node's own settings
towards other brokers and the controllers, and SCRAM's client half against the server half."""

from __future__ import annotations

import pytest
from riverlog.config import BrokerConfig, ConfigError
from riverlog.security.client_config import (
    ClientSecurity,
    controller_security,
    inter_broker_security,
)
from riverlog.security.sasl.errors import SaslAuthenticationError
from riverlog.security.sasl.scram import ScramClient, ScramServer, make_credential

pytestmark = pytest.mark.unit

SCRAM_LOGIN = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cret";'


def test_plaintext_is_the_default() -> None:
    security = ClientSecurity.from_properties({})
    assert (security.protocol, security.tls, security.sasl) == ("PLAINTEXT", False, False)


def test_sasl_properties_give_mechanism_and_login() -> None:
    security = ClientSecurity.from_properties({"security.protocol": "sasl_plaintext",
                                               "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": SCRAM_LOGIN})
    assert (security.protocol, security.mechanism, security.username, security.password) == \
        ("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", "s3cret")


@pytest.mark.parametrize("props, named", [
    ({"security.protocol": "TLS"}, "security.protocol=TLS"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": SCRAM_LOGIN}, "sasl.mechanism=GSSAPI"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sets no sasl.jaas.config"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\";"},
     "needs username"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "JKS"}, "PEM only"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent/ca.pem"}, "cannot load"),
])
def test_what_the_client_cannot_honour_is_refused_with_the_fix(props: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        ClientSecurity.from_properties(props)


def test_hostname_checks_follow_the_endpoint_identification_algorithm() -> None:
    assert ClientSecurity.from_properties({"security.protocol": "SSL"}).ssl_context().check_hostname
    off = ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": ""})
    assert not off.check_hostname and not off.ssl_context().check_hostname


def _node(**extra: str) -> BrokerConfig:
    return BrokerConfig({
        "listeners": "PLAINTEXT://:9092,INTERNAL://:9094,CONTROLLER://:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="ctl" password="p" '
            'user_ctl="p";',
        **extra})


def test_a_node_authenticates_with_its_listeners_jaas_entry() -> None:
    config = _node(**{"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                      "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_LOGIN,
                      "sasl.mechanism.controller.protocol": "PLAIN"})
    inter = inter_broker_security(config)
    assert (inter.protocol, inter.mechanism, inter.username) == ("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice")
    ctl = controller_security(config)
    assert (ctl.protocol, ctl.mechanism, ctl.username, ctl.password) == ("SASL_PLAINTEXT", "PLAIN", "ctl", "p")
    assert inter_broker_security(BrokerConfig({})).protocol == "PLAINTEXT"


def test_a_node_needs_a_mechanism_it_speaks_on_a_sasl_node_listener() -> None:
    # Kafka's default for both keys is GSSAPI, which Riverlog does not speak.
    with pytest.raises(ConfigError, match="sasl.mechanism.inter.broker.protocol=GSSAPI"):
        inter_broker_security(_node())
    with pytest.raises(ConfigError, match="controller listener cannot use them"):
        controller_security(_node(**{"sasl.mechanism.controller.protocol": "SCRAM-SHA-512"}))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_and_server_agree_and_check_each_other(mechanism: str) -> None:
    credential = make_credential(mechanism, "s3cret", iterations=4096)
    server = ScramServer(mechanism, lambda user, mech: credential if user == "al,i=ce" else None)
    client = ScramClient(mechanism, "al,i=ce", "s3cret")
    server_first = server.step(client.first())
    server_final = server.step(client.final(server_first))
    client.verify(server_final)
    assert server.done and server.username == "al,i=ce"
    # A server that does not hold the credential cannot sign the exchange as the client expects.
    impostor = ScramClient(mechanism, "al,i=ce", "s3cret")
    server = ScramServer(mechanism, lambda user, mech: credential)
    impostor.final(server.step(impostor.first()))
    with pytest.raises(SaslAuthenticationError, match="signature does not match"):
        impostor.verify(b"v=" + b"QUFBQQ==")


def test_a_wrong_password_fails_on_the_server() -> None:
    credential = make_credential("SCRAM-SHA-512", "right")
    server = ScramServer("SCRAM-SHA-512", lambda user, mech: credential)
    client = ScramClient("SCRAM-SHA-512", "bob", "wrong")
    with pytest.raises(SaslAuthenticationError):
        server.step(client.final(server.step(client.first())))


@pytest.mark.parametrize("server_first", [b"garbage", b"r=other,s=AAAA,i=4096", b"r=NONCEx,s=AAAA,i=100"])
def test_the_client_refuses_a_dishonest_server_first_message(server_first: bytes) -> None:
    client = ScramClient("SCRAM-SHA-256", "bob", "pw", nonce=lambda: "NONCE")
    with pytest.raises(SaslAuthenticationError):
        client.final(server_first)
