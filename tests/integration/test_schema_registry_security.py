"""The schema registry secured (issue #20): https, HTTP basic auth with roles, and the registry as a
SCRAM user of a SASL_SSL cluster with ACLs.

One broker for the module: the harness's PLAINTEXT listener (``User:ANONYMOUS``, a super user, for
granting ACLs) and ``SECURE`` (SASL_SSL, SCRAM-SHA-512) with the StandardAuthorizer. The registry
user ``registry`` gets exactly the ACLs docs/schema-registry.md lists, and nothing else.

Two registry instances on that listener, both serving https: ``writer`` (a PKCS12 keystore, the
users from a Jetty users file, a PKCS12 truststore for the cluster) and ``follower`` (a PEM
keystore, the users through Confluent's JAAS route, ``leader.eligibility=false`` so every write
through it is forwarded to ``writer``, checked with its truststore). Clients are confluent-kafka's
``SchemaRegistryClient`` with ``basic.auth.user.info`` and ``ssl.ca.location``, and ``riverlog
schemas``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from support.brokers import BrokerProcess
from support.certs import TestPki, pem_cert, pem_key
from support.sr_registry import RegistryProcess, http

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO_ROOT = Path(__file__).resolve().parents[2]
DIRECTORY_PROVIDER = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
REALM = "SchemaRegistry-Props"
STORE_PASSWORD = "store-secret"
GROUP = "schema-registry-secured"
TOPIC = "_schemas"
ALICE, BOB, CAROL = "alice:alice-secret", "bob:bob-secret", "carol:carol-secret"
RECORD = {"type": "record", "name": "Payment", "fields": [{"name": "id", "type": "string"}]}


def obfuscated(password: str) -> str:
    """Jetty's ``Password.obfuscate``, to write an ``OBF:`` entry as Jetty's tool would."""
    data = password.encode()
    out = ""
    for i, b1 in enumerate(data):
        b2 = data[len(data) - i - 1]
        value = (127 + b1 + b2) * 256 + (127 + b1 - b2)
        digits = ""
        while value:
            digits = "0123456789abcdefghijklmnopqrstuvwxyz"[value % 36] + digits
            value //= 36
        out += digits.rjust(4, "0")
    return "OBF:" + out


@dataclass
class Secured:
    pki: TestPki
    broker: BrokerProcess
    writer: RegistryProcess
    follower: RegistryProcess

    def client(self, registry: RegistryProcess, user_info: str | None) -> SchemaRegistryClient:
        conf = {"url": registry.url, "ssl.ca.location": str(self.pki.truststore)}
        if user_info is not None:
            conf["basic.auth.user.info"] = user_info
        return SchemaRegistryClient(conf)


def registry_acls(user: str) -> list[AclBinding]:
    """What docs/schema-registry.md says the registry's user needs (READ and WRITE imply DESCRIBE)."""
    topic = [(ResourceType.TOPIC, TOPIC, op) for op in (AclOperation.CREATE, AclOperation.READ, AclOperation.WRITE)]
    group = [(ResourceType.GROUP, GROUP, AclOperation.READ)]
    return [AclBinding(kind, name, ResourcePatternType.LITERAL, f"User:{user}", "*", op, AclPermissionType.ALLOW)
            for kind, name, op in topic + group]


def grant(broker: BrokerProcess, bindings: list[AclBinding]) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_acls(bindings).values():
        future.result(30)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    deadline = time.monotonic() + 30
    while not set(bindings) <= set(admin.describe_acls(everything).result(30)):
        assert time.monotonic() < deadline, "the broker never described the registry's ACLs"
        time.sleep(0.2)


def write_stores(pki: TestPki) -> dict[str, Path]:
    """The writer's PKCS12 keystore and truststore, the follower's PEM keystore."""
    files = {"writer.p12": pki.directory / "writer.p12", "trust.p12": pki.directory / "trust.p12",
             "follower.pem": pki.directory / "follower.pem"}
    key, cert = pki.ca.issue("registry-writer", server=True)
    files["writer.p12"].write_bytes(pkcs12.serialize_key_and_certificates(
        b"writer", key, cert, [pki.ca.cert], serialization.BestAvailableEncryption(STORE_PASSWORD.encode())))
    files["trust.p12"].write_bytes(pkcs12.serialize_key_and_certificates(
        None, None, None, [pki.ca.cert], serialization.BestAvailableEncryption(STORE_PASSWORD.encode())))
    key, cert = pki.ca.issue("registry-follower", server=True)
    files["follower.pem"].write_bytes(pem_key(key) + pem_cert(cert) + pem_cert(pki.ca.cert))
    return files


def write_users(directory: Path) -> tuple[Path, Path]:
    """A Jetty users file (plain, MD5 and OBF passwords), and a JAAS file pointing at it."""
    users = directory / "password-file"
    users.write_text("# user: password,roles\n"
                     "alice: alice-secret,admin\n"
                     f"bob: MD5:{hashlib.md5(b'bob-secret').hexdigest()},developer\n"
                     f"carol: {obfuscated('carol-secret')},reader\n")
    jaas = directory / "jaas.conf"
    jaas.write_text(f"{REALM} {{\n  org.eclipse.jetty.jaas.spi.PropertyFileLoginModule required\n"
                    f'  file="{users}"\n  debug="false";\n}};\n')
    return users, jaas


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    base = tmp_path_factory.mktemp("sr-security")
    pki = TestPki.create(base / "pki")
    stores = write_stores(pki)
    users, jaas = write_users(base)
    tls = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker_keystore),
           "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.truststore)}
    # Riverlog's broker: bootstrap.scram.credentials is its start-time form of Kafka's
    # 'kafka-storage format --add-scram', so the registry's user exists before anything connects.
    broker = BrokerProcess(base / "broker", target="riverlog", overrides={
        "group.initial.rebalance.delay.ms": "0",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
        **{f"listener.name.secure.{k}": v for k, v in tls.items()},
        "listener.name.secure.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.secure.scram-sha-512.sasl.jaas.config": f"{SCRAM_LOGIN} required;",
        "bootstrap.scram.credentials": "SCRAM-SHA-512=[name=registry,password=registry-secret]"})
    secure_port = broker.add_listener("SECURE", "SASL_SSL", advertised_host="localhost")
    kafkastore = {"kafkastore.security.protocol": "SASL_SSL", "kafkastore.sasl.mechanism": "SCRAM-SHA-512",
                  "kafkastore.sasl.jaas.config": f'{SCRAM_LOGIN} required username="registry" '
                                                 'password="registry-secret";',
                  "schema.registry.group.id": GROUP, "authentication.method": "BASIC",
                  "authentication.realm": REALM, "authentication.roles": "admin,developer"}
    # The follower reads its password as the operator's pods do: a Secret-like file, through
    # Kafka's DirectoryConfigProvider.
    secret_dir = base / "registry-user"
    secret_dir.mkdir()
    (secret_dir / "password").write_text("registry-secret")
    from_secret_file = {"config.providers": "dir", "config.providers.dir.class": DIRECTORY_PROVIDER,
                        "config.providers.dir.param.allowed.paths": str(secret_dir),
                        "kafkastore.sasl.jaas.config": f'{SCRAM_LOGIN} required username="registry" '
                                                       f'password="${{dir:{secret_dir}:password}}";'}
    # Confluent's form of the bootstrap list: the SASL_SSL entry is the one used.
    bootstrap = f"PLAINTEXT://{broker.bootstrap},SASL_SSL://localhost:{secure_port}"
    writer = RegistryProcess(base / "writer", bootstrap, name="writer", scheme="https", ca=pki.truststore,
                             user_info=ALICE, extra={
                                 **kafkastore, "kafkastore.ssl.truststore.type": "PKCS12",
                                 "kafkastore.ssl.truststore.location": str(stores["trust.p12"]),
                                 "kafkastore.ssl.truststore.password": STORE_PASSWORD,
                                 "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(stores["writer.p12"]),
                                 "ssl.keystore.password": STORE_PASSWORD, "ssl.key.password": STORE_PASSWORD,
                                 "authentication.users.file": str(users)})
    follower = RegistryProcess(base / "follower", bootstrap, name="follower", scheme="https", ca=pki.truststore,
                               user_info=BOB, extra={
                                   **kafkastore, **from_secret_file, "kafkastore.ssl.truststore.type": "PEM",
                                   "kafkastore.ssl.truststore.location": str(pki.truststore),
                                   "ssl.keystore.type": "PEM", "ssl.keystore.location": str(stores["follower.pem"]),
                                   "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.truststore),
                                   "leader.eligibility": "false", "authentication.jaas.config.file": str(jaas)})
    try:
        broker.start()
        grant(broker, registry_acls("registry"))
        writer.start()
        writer.wait_writer_elected()
        follower.start()
        follower.wait_writer_elected()
        yield Secured(pki, broker, writer, follower)
    finally:
        follower.stop()
        writer.stop()
        broker.close()


def refused(client: SchemaRegistryClient) -> SchemaRegistryError:
    with pytest.raises(SchemaRegistryError) as caught:
        client.get_subjects()
    return caught.value


def test_no_or_wrong_credentials_are_refused_with_a_challenge(secured: Secured) -> None:
    for registry in (secured.writer, secured.follower):
        status, body = http(registry.url, "GET", "/subjects", context=registry.context)
        assert (status, body) == (401, {"error_code": 401, "message": "Unauthorized"})
        assert refused(secured.client(registry, None)).http_status_code == 401
        assert refused(secured.client(registry, "alice:wrong")).http_status_code == 401
        assert refused(secured.client(registry, "nobody:alice-secret")).http_status_code == 401
    # A write without credentials is refused by the instance it reaches, not forwarded.
    status, _ = http(secured.follower.url, "POST", "/subjects/x/versions", {"schema": json.dumps(RECORD)},
                     context=secured.follower.context)
    assert status == 401


def test_the_challenge_names_the_realm(secured: Secured) -> None:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(secured.writer.url + "/schemas/types")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10, context=secured.writer.context)
    assert caught.value.code == 401
    assert caught.value.headers["WWW-Authenticate"] == f'Basic realm="{REALM}"'


def test_a_user_without_an_allowed_role_is_forbidden(secured: Secured) -> None:
    for registry in (secured.writer, secured.follower):
        error = refused(secured.client(registry, CAROL))
        assert (error.http_status_code, error.error_code) == (403, 403)


def test_users_with_a_role_register_and_read_over_https(secured: Secured) -> None:
    alice = secured.client(secured.writer, ALICE)
    schema_id = alice.register_schema("payments-value", Schema(json.dumps(RECORD), "AVRO"))
    bob = secured.client(secured.writer, BOB)  # an MD5 password
    assert json.loads(bob.get_schema(schema_id).schema_str) == RECORD
    assert "payments-value" in bob.get_subjects()


def test_a_write_through_the_follower_is_forwarded_with_the_callers_credentials(secured: Secured) -> None:
    follower = secured.client(secured.follower, BOB)
    schema = {**RECORD, "name": "Refund"}
    schema_id = follower.register_schema("refunds-value", Schema(json.dumps(schema), "AVRO"))
    # Read back through both instances: the writer wrote it, the follower waited to read it.
    assert follower.get_latest_version("refunds-value").schema_id == schema_id
    assert secured.client(secured.writer, ALICE).get_latest_version("refunds-value").schema_id == schema_id
    # The writer decides on the forwarded caller too: carol is forbidden there as here.
    carol = secured.client(secured.follower, CAROL)
    with pytest.raises(SchemaRegistryError) as caught:
        carol.register_schema("refunds-value", Schema(json.dumps(schema), "AVRO"))
    assert caught.value.http_status_code == 403


def test_metrics_stay_reachable_without_credentials(secured: Secured) -> None:
    status, body = http(secured.writer.url, "GET", "/metrics", context=secured.writer.context)
    assert status == 200 and "schema_registry" in body


def test_the_documented_acls_are_all_the_registry_user_needs(secured: Secured) -> None:
    admin = AdminClient({"bootstrap.servers": secured.broker.bootstrap})
    assert TOPIC in admin.list_topics(timeout=30).topics  # created by the registry's user
    # Everything above worked as User:registry, and the authorizer never had to refuse it anything.
    assert "Principal = User:registry is Denied" not in secured.broker.log_path.read_text(errors="replace")


def schemas_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "broker_image")}
    for name in ("RIVERLOG_SCHEMA_REGISTRY_URL", "RIVERLOG_SCHEMA_REGISTRY_USER_INFO", "RIVERLOG_SCHEMA_REGISTRY_CA"):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "riverlog", "schemas", *args], capture_output=True, text=True,
                          timeout=60, env=env)


def test_riverlog_schemas_authenticates_over_https(secured: Secured, tmp_path: Path) -> None:
    url = secured.follower.url
    ca = str(secured.pki.truststore)
    denied = schemas_cli("--url", url, "--ca-file", ca, "list")
    assert denied.returncode == 1 and "Unauthorized (HTTP 401" in denied.stderr
    untrusted = schemas_cli("--url", url, "--user", ALICE, "list")
    assert untrusted.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr
    config = tmp_path / "client.properties"
    config.write_text(f"url={url}\nbasic.auth.credentials.source=USER_INFO\nbasic.auth.user.info={BOB}\n"
                      f"ssl.ca.location={ca}\n")
    registered = schemas_cli("--config", str(config), "register", "cli-value", "--schema",
                             json.dumps({**RECORD, "name": "Cli"}))
    assert registered.returncode == 0, registered.stderr
    assert "registered under cli-value: id" in registered.stdout
    listed = schemas_cli("--url", url, "--ca-file", ca, "--user", ALICE, "list", "--prefix", "cli-")
    assert listed.returncode == 0, listed.stderr
    assert "cli-value" in listed.stdout


def test_a_refused_configuration_stops_the_registry_with_the_reason(tmp_path: Path) -> None:
    def start(*settings: str) -> subprocess.CompletedProcess[str]:
        args = [arg for s in settings for arg in ("--set", s)]
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "broker_image")}
        return subprocess.run([sys.executable, "-m", "riverlog", "schema-registry", "--bootstrap-server",
                               "127.0.0.1:1", *args], capture_output=True, text=True, timeout=60, env=env)

    basic = start("authentication.method=BASIC")
    assert basic.returncode == 2 and "authentication.users.file" in basic.stderr
    https = start("listeners=https://127.0.0.1:0")
    assert https.returncode == 2 and "ssl.keystore.location" in https.stderr
    sasl = start("kafkastore.security.protocol=SASL_SSL", "kafkastore.sasl.mechanism=SCRAM-SHA-512")
    assert sasl.returncode == 2 and "sasl.jaas.config" in sasl.stderr
