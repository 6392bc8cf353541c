"""TLS listener settings: Kafka's property names, per-listener overrides, and the refusals (with
the fix) of what a PEM-only broker cannot honour."""

from __future__ import annotations

import pytest
from riverlog.config import BrokerConfig, ConfigError
from riverlog.security.tls import TlsSettings

pytestmark = pytest.mark.unit

LISTENERS = {"listeners": "PLAINTEXT://:9092,EXTERNAL://:9093",
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:SSL,CONTROLLER:PLAINTEXT"}


def settings(**props: str) -> TlsSettings:
    return TlsSettings.of(BrokerConfig({**LISTENERS, **props}), "EXTERNAL")


def test_a_listener_s_own_setting_wins() -> None:
    s = settings(**{"ssl.keystore.location": "/all.pem", "listener.name.external.ssl.keystore.location": "/ext.pem",
                    "ssl.client.auth": "requested", "ssl.truststore.location": "/ca.pem"})
    assert (s.keystore_location, s.client_auth, s.truststore_location) == ("/ext.pem", "requested", "/ca.pem")
    assert s.protocols == ("TLSv1.2", "TLSv1.3")


@pytest.mark.parametrize("props, says", [
    ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/k.jks"}, "Riverlog reads PEM only"),
    ({"ssl.keystore.location": "/k.pem", "ssl.keystore.password": "x"}, "a PEM keystore has no store password"),
    ({"ssl.keystore.location": "/k.pem", "ssl.truststore.location": "/ca.pem", "ssl.truststore.password": "x"},
     "a PEM truststore has no password"),
    ({}, "has no key and certificate"),
    ({"ssl.keystore.location": "/k.pem", "ssl.keystore.key": "K", "ssl.keystore.certificate.chain": "C"},
     "use one"),
    ({"ssl.keystore.key": "K"}, "go together"),
    ({"ssl.keystore.location": "/k.pem", "ssl.client.auth": "required"}, "needs the CAs that sign client"),
    ({"ssl.keystore.location": "/k.pem", "ssl.client.auth": "sometimes"}, "must be none, requested or required"),
    ({"ssl.keystore.location": "/k.pem", "ssl.enabled.protocols": "TLSv1.1"}, "may hold TLSv1.2 and TLSv1.3"),
    ({"ssl.keystore.location": "/k.pem", "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}, "cannot map Java"),
])
def test_what_cannot_be_honoured_is_refused_with_the_fix(props: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        settings(**props)
