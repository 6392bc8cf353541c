"""Properties that ask for security Riverlog does not implement stop the broker at start, named
with what to do; harmless unknown properties (and Kafka's sample protocol map) still load."""

from __future__ import annotations

import pytest
from riverlog.config import BrokerConfig, ConfigError

pytestmark = pytest.mark.unit

PLAIN = {"listeners": "PLAINTEXT://127.0.0.1:9092"}


@pytest.mark.parametrize("extra, named", [
    ({"ssl.keystore.location": "/etc/kafka/broker.jks"}, "ssl.keystore.location"),
    ({"ssl.client.auth": "required"}, "ssl.client.auth"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-512"}, "sasl.enabled.mechanisms"),
    ({"sasl.mechanism.inter.broker.protocol": "PLAIN"}, "sasl.mechanism.inter.broker.protocol"),
    ({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}, "authorizer.class.name"),
    ({"super.users": "User:admin"}, "super.users"),
    ({"allow.everyone.if.no.acl.found": "false"}, "allow.everyone.if.no.acl.found"),
    ({"security.inter.broker.protocol": "SSL"}, "security.inter.broker.protocol=SSL"),
    ({"listener.name.plaintext.plain.sasl.jaas.config": "x"}, "listener.name.plaintext.plain.sasl.jaas.config"),
    ({"principal.builder.class": "x.Builder"}, "principal.builder.class"),
    ({"delegation.token.secret.key": "k"}, "delegation.token.secret.key"),
])
def test_each_security_property_is_refused_by_name(extra: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError) as refused:
        BrokerConfig({**PLAIN, **extra})
    assert named in str(refused.value) and "Riverlog serves only PLAINTEXT" in str(refused.value)


@pytest.mark.parametrize("listeners, protocol_map, named", [
    ("SASL_SSL://:9093", None, "listener SASL_SSL"),
    ("SSL://:9093", None, "listener SSL"),
    ("SASL_PLAINTEXT://:9093", None, "listener SASL_PLAINTEXT"),
    ("PLAINTEXT://:9092,EXTERNAL://:9094", "PLAINTEXT:PLAINTEXT,EXTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT",
     "listener EXTERNAL (SASL_SSL)"),
])
def test_a_listener_that_is_not_plaintext_is_refused(listeners: str, protocol_map: str | None, named: str) -> None:
    props = {"listeners": listeners}
    if protocol_map:
        props["listener.security.protocol.map"] = protocol_map
    with pytest.raises(ConfigError, match="unsupported security configuration") as refused:
        BrokerConfig(props)
    assert named in str(refused.value)


def test_every_offender_is_named_at_once() -> None:
    with pytest.raises(ConfigError) as refused:
        BrokerConfig({"listeners": "SASL_SSL://:9093", "ssl.keystore.location": "/k",
                      "sasl.enabled.mechanisms": "PLAIN", "authorizer.class.name": "A"})
    for named in ("listener SASL_SSL", "ssl.keystore.location", "sasl.enabled.mechanisms", "authorizer.class.name"):
        assert named in str(refused.value)


def test_a_listener_missing_from_the_protocol_map_is_refused_as_kafka_does() -> None:
    with pytest.raises(ConfigError, match="listener SECURE has no entry in listener.security.protocol.map"):
        BrokerConfig({"listeners": "SECURE://:9092"})


def test_what_is_harmless_still_loads() -> None:
    # Kafka's sample server.properties maps SSL and SASL_SSL without using them; a PLAINTEXT
    # inter-broker protocol is what Riverlog does; other unknown keys are only reported.
    config = BrokerConfig({**PLAIN, "security.inter.broker.protocol": "PLAINTEXT", "num.network.threads": "3",
                           "listener.security.protocol.map":
                               "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL"})
    assert config.unknown == ["num.network.threads", "security.inter.broker.protocol"]
    assert BrokerConfig({"listeners": "INTERNAL://:9092",
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
