"""Properties that ask for security Riverlog does not implement yet stop the broker at start,
named with what to do; what it serves (TLS and SASL listeners) and harmless unknown properties
(and Kafka's sample protocol map) load."""

from __future__ import annotations

import pytest
from riverlog.config import BrokerConfig, ConfigError

pytestmark = pytest.mark.unit

PLAIN = {"listeners": "PLAINTEXT://127.0.0.1:9092"}


@pytest.mark.parametrize("extra, named", [
    # OAUTHBEARER's client side (a broker fetching tokens for node-to-node traffic) is not served.
    ({"sasl.oauthbearer.token.endpoint.url": "https://idp/token"}, "sasl.oauthbearer.token.endpoint.url"),
    ({"listener.name.sasl.oauthbearer.sasl.oauthbearer.client.credentials.client.id": "broker"},
     "listener.name.sasl.oauthbearer.sasl.oauthbearer.client.credentials.client.id"),
    ({"sasl.login.callback.handler.class": "x"}, "sasl.login.callback.handler.class"),
    ({"listener.name.sasl.oauthbearer.sasl.login.callback.handler.class": "x"},
     "listener.name.sasl.oauthbearer.sasl.login.callback.handler.class"),
    # Server callback handlers: only Kafka's OAUTHBEARER validator is served.
    ({"sasl.server.callback.handler.class": "com.example.MyHandler"}, "sasl.server.callback.handler.class"),
    ({"listener.name.sasl.plain.sasl.server.callback.handler.class": "com.example.PlainHandler"},
     "listener.name.sasl.plain.sasl.server.callback.handler.class"),
    ({"sasl.kerberos.service.name": "kafka"}, "sasl.kerberos.service.name"),
    ({"listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class": "x"},
     "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class"),
    ({"principal.builder.class": "x.Builder"}, "principal.builder.class"),
    ({"delegation.token.secret.key": "k"}, "delegation.token.secret.key"),
])
def test_each_security_property_not_served_yet_is_refused_by_name(extra: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError) as refused:
        BrokerConfig({**PLAIN, **extra})
    assert named in str(refused.value) and "not yet GSSAPI" in str(refused.value)


@pytest.mark.parametrize("listeners, protocol_map", [
    ("PLAINTEXT://:9092,SSL://:9093", None),
    ("PLAINTEXT://:9092,SASL_SSL://:9093", None),
    ("PLAINTEXT://:9092,SASL_PLAINTEXT://:9093", None),
    ("PLAINTEXT://:9092,EXTERNAL://:9094", "PLAINTEXT:PLAINTEXT,EXTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT"),
])
def test_client_listeners_of_every_protocol_load(listeners: str, protocol_map: str | None) -> None:
    props = {"listeners": listeners}
    if protocol_map:
        props["listener.security.protocol.map"] = protocol_map
    config = BrokerConfig(props)
    assert {config.security_protocol(lst.name) for lst in config.listeners()} - {"PLAINTEXT"}


def test_node_to_node_traffic_may_use_any_protocol_kafka_has() -> None:
    tls = BrokerConfig({"listeners": "PLAINTEXT://:9092,SSL://:9093", "inter.broker.listener.name": "SSL"})
    assert tls.inter_broker_listener() == "SSL"
    # Kafka's older property names the listener by its protocol.
    older = BrokerConfig({"listeners": "PLAINTEXT://:9092,SASL_SSL://:9093",
                          "security.inter.broker.protocol": "SASL_SSL"})
    assert older.inter_broker_listener() == "SASL_SSL"
    secured_quorum = BrokerConfig({"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
                                   "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL"})
    assert secured_quorum.security_protocol(secured_quorum.controller_listener()) == "SASL_SSL"


@pytest.mark.parametrize("props, named", [
    ({"listeners": "SSL://:9093"}, "the inter-broker listener PLAINTEXT .* is not one of the listeners"),
    ({"listeners": "PLAINTEXT://:9092,SSL://:9093", "inter.broker.listener.name": "SSL",
      "security.inter.broker.protocol": "SSL"}, "Kafka allows only one"),
])
def test_the_inter_broker_listener_must_exist_and_be_named_once(props: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        BrokerConfig(props)


def test_every_offender_is_named_at_once() -> None:
    with pytest.raises(ConfigError) as refused:
        BrokerConfig({**PLAIN, "sasl.oauthbearer.token.endpoint.url": "a", "principal.builder.class": "x",
                      "delegation.token.secret.key": "k"})
    for named in ("sasl.oauthbearer.token.endpoint.url", "principal.builder.class", "delegation.token.secret.key"):
        assert named in str(refused.value)


def test_kafka_s_standard_authorizer_is_served_and_any_other_class_refused() -> None:
    config = BrokerConfig({**PLAIN, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                           "super.users": "User:admin;User:ops", "allow.everyone.if.no.acl.found": "true"})
    assert config.unknown == []
    with pytest.raises(ConfigError, match="AclAuthorizer is not served"):
        BrokerConfig({**PLAIN, "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    with pytest.raises(ConfigError, match="allow.everyone.if.no.acl.found"):
        BrokerConfig({**PLAIN, "allow.everyone.if.no.acl.found": "maybe"})


def test_a_listener_missing_from_the_protocol_map_is_refused_as_kafka_does() -> None:
    with pytest.raises(ConfigError, match="listener SECURE has no entry in listener.security.protocol.map"):
        BrokerConfig({"listeners": "SECURE://:9092"})


def test_what_is_harmless_still_loads() -> None:
    # Kafka's sample server.properties maps SSL and SASL_SSL without using them; unknown keys are
    # only reported.
    config = BrokerConfig({**PLAIN, "security.inter.broker.protocol": "PLAINTEXT", "num.network.threads": "3",
                           "listener.security.protocol.map":
                               "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL"})
    assert config.unknown == ["num.network.threads"]
    # Per-listener TLS and SASL keys are read, so not reported as unknown.
    scoped = BrokerConfig({**PLAIN, "listener.name.plaintext.ssl.client.auth": "required",
                           "listener.name.plaintext.plain.sasl.jaas.config": "x",
                           "listener.name.plaintext.sasl.enabled.mechanisms": "PLAIN"})
    assert scoped.unknown == []
    assert BrokerConfig({"listeners": "INTERNAL://:9092", "inter.broker.listener.name": "INTERNAL",
                         "listener.security.protocol.map": "INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"}).listeners()


def test_effective_configuration_names_sources_and_hides_secrets() -> None:
    config = BrokerConfig({**PLAIN, "num.partitions": "4", "password.encoder.secret": "s3cret", "foo": "1"},
                          sources={"num.partitions": "--set", "password.encoder.secret": "server.properties",
                                   "foo": "server.properties"})
    rows = {key: (value, source) for key, value, source in config.effective()}
    assert rows["num.partitions"] == ("4", "--set")
    assert rows["listeners"] == ("PLAINTEXT://127.0.0.1:9092", "set")
    assert rows["log.retention.hours"][1] == "default"
    assert rows["password.encoder.secret"] == ("(hidden)", "server.properties (ignored: not used by Riverlog)")
    assert rows["foo"][1].endswith("(ignored: not used by Riverlog)")


VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


@pytest.mark.parametrize("served", [
    {"sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks", "sasl.oauthbearer.expected.audience": "kafka",
     "sasl.oauthbearer.expected.issuer": "https://idp", "sasl.oauthbearer.clock.skew.seconds": "10",
     "sasl.oauthbearer.sub.claim.name": "client_id", "sasl.oauthbearer.scope.claim.name": "scp",
     "sasl.oauthbearer.jwks.endpoint.refresh.ms": "60000", "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "50",
     "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "500"},
    {"sasl.server.callback.handler.class": VALIDATOR},
    {"listener.name.sasl.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
     "listener.name.sasl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": "file:/etc/jwks.json",
     "listener.name.sasl.sasl.oauthbearer.expected.audience": "kafka",
     "listener.name.sasl.oauthbearer.sasl.jaas.config":
         "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"},
])
def test_oauthbearer_validation_settings_load_and_are_known(served: dict[str, str]) -> None:
    config = BrokerConfig({**PLAIN, **served})
    assert config.unknown == []
