"""The registry's security settings under Confluent's names: https listeners with PEM or PKCS12
stores, client certificates, basic auth settings, the kafkastore.* client, and the refusals."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from riverlog.cli.schemas_connection import connection
from riverlog.config import ConfigError
from riverlog.schema_registry.settings import settings_from
from support.certs import TestPki, pem_cert, pem_key

pytestmark = pytest.mark.unit

BASE = {"kafkastore.bootstrap.servers": "k:9092"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TestPki:
    pki = TestPki.create(tmp_path_factory.mktemp("pki"))
    key, cert = pki.ca.issue("registry", server=True)
    (pki.directory / "registry.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        b"registry", key, cert, [pki.ca.cert], serialization.BestAvailableEncryption(b"pw")))
    (pki.directory / "trust.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        None, None, None, [pki.ca.cert], serialization.BestAvailableEncryption(b"pw")))
    (pki.directory / "store.jks").write_bytes(b"\xfe\xed\xfe\xed" + b"\0" * 60)
    return pki


def https(pki: TestPki, **extra: str) -> dict[str, str]:
    return {**BASE, "listeners": "https://127.0.0.1:8443", "ssl.keystore.location": str(pki.directory / "registry.p12"),
            "ssl.keystore.password": "pw", **extra}


def test_an_https_listener_with_a_pkcs12_keystore(pki: TestPki) -> None:
    s = settings_from(https(pki, **{"ssl.keystore.type": "PKCS12"}))
    assert (s.url, s.scheme) == ("https://127.0.0.1:8443", "https")
    assert s.https is not None and s.https.client_authentication == "NONE"
    assert s.https.server_context().verify_mode == ssl.CERT_NONE
    assert s.https.client_context().check_hostname  # forwarding checks the writer's name


def test_a_pem_keystore_and_client_certificates_required(pki: TestPki) -> None:
    s = settings_from({**BASE, "listeners": "https://0.0.0.0:8443", "ssl.keystore.type": "PEM",
                       "ssl.keystore.location": str(pki.broker_keystore),
                       "ssl.truststore.location": str(pki.truststore), "ssl.client.auth": "true", "host.name": "sr-0"})
    assert s.url == "https://sr-0:8443"
    assert s.https is not None and s.https.server_context().verify_mode == ssl.CERT_REQUIRED
    requested = settings_from({**https(pki), "ssl.truststore.location": str(pki.directory / "trust.p12"),
                               "ssl.truststore.password": "pw", "ssl.client.authentication": "REQUESTED"})
    assert requested.https is not None and requested.https.server_context().verify_mode == ssl.CERT_OPTIONAL


def test_http_and_https_listeners_and_the_inter_instance_protocol(pki: TestPki) -> None:
    both = {**https(pki), "listeners": "http://0.0.0.0:8081,https://0.0.0.0:8443"}
    assert settings_from(both).url == "http://localhost:8081"
    s = settings_from({**both, "inter.instance.protocol": "https"})
    assert s.url == "https://localhost:8443" and [lst.scheme for lst in s.listeners] == ["http", "https"]
    with pytest.raises(ConfigError, match="no listener is https"):
        settings_from({**BASE, "inter.instance.protocol": "https"})


@pytest.mark.parametrize("change,words", [
    ({"ssl.keystore.location": ""}, "needs its key and certificate"),
    ({"ssl.keystore.password": "wrong"}, "wrong password"),
    ({"ssl.keystore.location": "/no/such/file"}, "cannot read it"),
    ({"ssl.client.authentication": "REQUIRED"}, "needs the CAs that sign client certificates"),
    ({"ssl.client.authentication": "MAYBE"}, "one of NONE, REQUESTED, REQUIRED"),
    ({"ssl.keystore.type": "BKS"}, "use one of PEM, PKCS12"),
])
def test_https_refusals_say_what_to_fix(pki: TestPki, change: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        settings_from({**https(pki), **change})


def test_a_jks_store_is_refused_with_the_conversion(pki: TestPki) -> None:
    with pytest.raises(ConfigError, match="keytool -importkeystore"):
        settings_from(https(pki, **{"ssl.keystore.location": str(pki.directory / "store.jks")}))


def test_basic_auth_settings(tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text("alice: secret,admin\n")
    s = settings_from({**BASE, "authentication.method": "BASIC", "authentication.users.file": str(users),
                       "authentication.roles": "admin, developer", "authentication.skip.paths": "/v1/metadata/id"})
    assert s.auth is not None and s.auth.authenticator.realm == "SchemaRegistry-Props"
    assert s.auth.authenticator.roles == {"admin", "developer"}
    assert s.auth.skips("/metrics") and s.auth.skips("/v1/metadata/id") and not s.auth.skips("/subjects")
    locked = settings_from({**BASE, "authentication.method": "BASIC", "authentication.users.file": str(users),
                            "riverlog.metrics.authentication": "true"})
    assert locked.auth is not None and not locked.auth.skips("/metrics")
    assert settings_from(BASE).auth is None


@pytest.mark.parametrize("props,words", [
    ({"authentication.method": "BASIC"}, "needs its users"),
    ({"authentication.method": "DIGEST"}, "serves NONE, BASIC"),
    ({"authentication.method": "BASIC", "authentication.users.file": "/no/such"}, "cannot read it"),
    ({"authentication.method": "BASIC", "authentication.users.file": "a", "authentication.jaas.config.file": "b"},
     "not both"),
])
def test_basic_auth_refusals(props: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        settings_from({**BASE, **props})


def test_an_empty_users_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "users").write_text("# nobody\n")
    with pytest.raises(ConfigError, match="holds no users"):
        settings_from({**BASE, "authentication.method": "BASIC", "authentication.users.file": str(tmp_path / "users")})


JAAS_SCRAM = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="sr" password="sr-secret";'


def test_the_kafkastore_client_settings(pki: TestPki, tmp_path: Path) -> None:
    assert settings_from(BASE).kafka_security is None
    s = settings_from({"kafkastore.bootstrap.servers": "PLAINTEXT://k:9092,SASL_SSL://k:9094",
                       "kafkastore.security.protocol": "SASL_SSL", "kafkastore.sasl.mechanism": "SCRAM-SHA-512",
                       "kafkastore.sasl.jaas.config": JAAS_SCRAM,
                       "kafkastore.ssl.truststore.location": str(pki.directory / "trust.p12"),
                       "kafkastore.ssl.truststore.type": "PKCS12", "kafkastore.ssl.truststore.password": "pw",
                       "kafkastore.ssl.keystore.location": str(pki.directory / "registry.p12"),
                       "kafkastore.ssl.keystore.password": "pw"})
    assert s.bootstrap == "k:9094"  # the entry of the chosen protocol, as Confluent picks it
    sec = s.kafka_security
    assert sec is not None and (sec.protocol, sec.mechanism, sec.username, sec.password) == (
        "SASL_SSL", "SCRAM-SHA-512", "sr", "sr-secret")
    assert "BEGIN CERTIFICATE" in sec.truststore_certificates and not sec.truststore_location
    assert "PRIVATE KEY" in sec.keystore_key and "BEGIN CERTIFICATE" in sec.keystore_chain
    pem = settings_from({**BASE, "kafkastore.security.protocol": "SSL",
                         "kafkastore.ssl.truststore.location": str(pki.truststore)}).kafka_security
    assert pem is not None and pem.truststore_location == str(pki.truststore)


@pytest.mark.parametrize("props,words", [
    ({"kafkastore.security.protocol": "SASL_SSL", "kafkastore.sasl.mechanism": "SCRAM-SHA-256"}, "sasl.jaas.config"),
    ({"kafkastore.security.protocol": "SASL_PLAINTEXT", "kafkastore.sasl.mechanism": "GSSAPI",
      "kafkastore.sasl.jaas.config": JAAS_SCRAM}, "GSSAPI"),
    ({"kafkastore.security.protocol": "TLS"}, "security.protocol=TLS"),
    ({"kafkastore.bootstrap.servers": "PLAINTEXT://k:9092", "kafkastore.security.protocol": "SSL"},
     "no entry speaks kafkastore.security.protocol=SSL"),
])
def test_kafkastore_refusals(props: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        settings_from({**BASE, **props})


def test_the_schemas_cli_connection_from_confluent_client_properties(pki: TestPki, tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("url=https://sr:8443\nbasic.auth.credentials.source=USER_INFO\n"
                      f"schema.registry.basic.auth.user.info=alice:secret\nssl.ca.location={pki.truststore}\n")
    conn = connection(config=str(config), environ={})
    assert conn.url == "https://sr:8443" and conn.headers == {"Authorization": "Basic YWxpY2U6c2VjcmV0"}
    assert conn.ssl_context is not None and conn.ssl_context.verify_mode == ssl.CERT_REQUIRED
    from_url = connection("https://bob:pw@sr:8443", environ={})
    assert from_url.url == "https://sr:8443" and from_url.headers == {"Authorization": "Basic Ym9iOnB3"}
    flag = connection("http://sr:8081", user="carol:x", environ={"RIVERLOG_SCHEMA_REGISTRY_USER_INFO": "no:no"})
    assert flag.headers == {"Authorization": "Basic Y2Fyb2w6eA=="} and flag.ssl_context is None
    assert connection(environ={"RIVERLOG_SCHEMA_REGISTRY_URL": "http://env:1"}).url == "http://env:1"
    keystore = tmp_path / "client.pem"
    key, cert = pki.ca.issue("cli")
    keystore.write_bytes(pem_key(key) + pem_cert(cert))
    config.write_text(f"schema.registry.ssl.keystore.location={keystore}\n"
                      f"schema.registry.ssl.truststore.location={pki.directory / 'trust.p12'}\n"
                      "schema.registry.ssl.truststore.password=pw\n")
    assert connection("https://sr:8443", config=str(config), environ={}).ssl_context is not None
    with pytest.raises(ConfigError, match="USER_INFO or URL"):
        config.write_text("basic.auth.credentials.source=SASL_INHERIT\n")
        connection("http://sr:8081", config=str(config), environ={})


def test_instances_requiring_client_certificates_still_reach_each_other(pki: TestPki) -> None:
    """Forwarding presents the instance's keystore: a writer with REQUIRED accepts its peers only."""
    import asyncio

    import aiohttp
    from aiohttp import web

    props = https(pki, **{"ssl.truststore.location": str(pki.truststore), "ssl.client.authentication": "REQUIRED"})
    writer = settings_from(props).https
    peer = settings_from({**props, "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker_keystore),
                          "ssl.keystore.password": ""}).https
    assert writer is not None and peer is not None

    async def root(request: web.Request) -> web.Response:
        return web.json_response({})

    async def scenario() -> None:
        app = web.Application()
        app.router.add_get("/", root)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=writer.server_context())
        await site.start()
        port = runner.addresses[0][1]
        try:
            async with aiohttp.ClientSession() as session:
                async with session.get(f"https://127.0.0.1:{port}/", ssl=peer.client_context()) as answer:
                    assert answer.status == 200
                anonymous = ssl.create_default_context(cafile=str(pki.truststore))
                with pytest.raises(aiohttp.ClientError):
                    async with session.get(f"https://127.0.0.1:{port}/", ssl=anonymous):
                        pass
        finally:
            await runner.cleanup()

    asyncio.run(scenario())
