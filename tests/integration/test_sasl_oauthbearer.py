"""SASL OAUTHBEARER on a SASL_PLAINTEXT listener (issue #17, acceptance 1), checked on both targets.

One broker for the module, its ``SASL`` listener enabling OAUTHBEARER with tokens checked against
a test identity provider on loopback (``support/oauth_idp.py``: a JWKS endpoint and an OAuth
client-credentials token endpoint issuing RS256 JWTs). Kafka is configured as its operators do
it (Kafka's OAuthBearerValidatorCallbackHandler, the JWKS URL, expected audience and issuer, and
the JVM's ``org.apache.kafka.sasl.oauthbearer.allowed.urls``); Riverlog reads the same keys.

The client matrix: confluent-kafka with ``oauth_cb`` and with librdkafka's own OIDC client,
kcat (librdkafka OIDC), kafka-python and aiokafka with token providers, and Kafka's CLI tools
(Java kafka-clients with Kafka's OAuthBearerLoginCallbackHandler) with ``--command-config``;
each produces a handful of records and reads them back. An invalid token (wrong signature,
expired) is answered with RFC 7628's error and then SASL_AUTHENTICATION_FAILED, and the client
reports an authentication error. A token signed with a key the provider published after the
broker's fetch is refused once, makes the broker fetch the JWKS again, and is then accepted.
Re-authentication (KIP-368): a client whose tokens live 10 s
re-authenticates on the same connection with a fresh token, and one on a second listener
(``REAUTH``, ``connections.max.reauth.ms`` of 4 s) with its long-lived token, each producing
past several session lifetimes on one connection.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from riverlog.client.connection import BrokerConnection
from riverlog.client.errors import ConnectionClosedError
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode
from support.brokers import BrokerProcess
from support.client_security import OAUTH_LOGIN_MODULE, ClientSecurity, OAuthLogin, bundled_librdkafka_env
from support.clients import group_values
from support.java_tools import JavaTools
from support.oauth_idp import AUDIENCE, ISSUER, IdentityProvider, SigningKey, claims, sign

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300),
              pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")]

VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
ALLOWED_URLS = "org.apache.kafka.sasl.oauthbearer.allowed.urls"
CLIENTS = {name: f"{name}-secret" for name in
           ("confluent-cb", "confluent-oidc", "kcat", "kafka-python", "aiokafka", "java-cli", "renewing")}
RENEWING_LIFETIME_S = 10
REAUTH_MS = 4000
RECORDS = [f"record-{i}".encode() for i in range(5)]


class OAuth:
    def __init__(self, broker: BrokerProcess, port: int, reauth_port: int, idp: IdentityProvider) -> None:
        self.broker, self.port, self.reauth_port, self.idp = broker, port, reauth_port, idp
        self.bootstrap = f"localhost:{port}"

    def login(self, client_id: str, method: str = "oidc", token: str | None = None) -> ClientSecurity:
        return ClientSecurity("SASL_PLAINTEXT", mechanism="OAUTHBEARER", oauth=OAuthLogin(
            self.idp.token_url, client_id, CLIENTS.get(client_id, "-"), method, token))

    @property
    def allowed_urls(self) -> dict[str, str]:
        return {ALLOWED_URLS: f"{self.idp.jwks_url},{self.idp.token_url}"}


@pytest.fixture(scope="module")
def oauth(module_broker_factory) -> Any:
    idp = IdentityProvider(clients=dict(CLIENTS), client_lifetimes={"renewing": RENEWING_LIFETIME_S}).start()
    overrides = {"sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
                 "sasl.oauthbearer.expected.audience": AUDIENCE,
                 "sasl.oauthbearer.expected.issuer": ISSUER,
                 "listener.name.reauth.oauthbearer.connections.max.reauth.ms": str(REAUTH_MS)}
    for listener in ("sasl", "reauth"):
        overrides.update({
            f"listener.name.{listener}.sasl.enabled.mechanisms": "OAUTHBEARER",
            f"listener.name.{listener}.oauthbearer.sasl.jaas.config": f"{OAUTH_LOGIN_MODULE} required;",
            f"listener.name.{listener}.oauthbearer.sasl.server.callback.handler.class": VALIDATOR})
    broker: BrokerProcess = module_broker_factory(start=False, overrides=overrides)
    broker.jvm_system_properties.update({ALLOWED_URLS: idp.jwks_url})
    port = broker.add_listener("SASL", "SASL_PLAINTEXT", advertised_host="localhost")
    reauth_port = broker.add_listener("REAUTH", "SASL_PLAINTEXT", advertised_host="localhost")
    broker.start()
    try:
        yield OAuth(broker, port, reauth_port, idp)
    finally:
        idp.stop()


def create_topic(oauth: OAuth, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": oauth.broker.bootstrap})  # the harness's PLAINTEXT listener
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def librdkafka_roundtrip(oauth: OAuth, security: ClientSecurity, topic: str) -> list[bytes]:
    conf = {"bootstrap.servers": oauth.bootstrap, **security.librdkafka()}
    producer = Producer({**conf, "message.timeout.ms": 30000})
    failures: list[object] = []
    for value in RECORDS:
        producer.produce(topic, value, on_delivery=lambda err, _m: err is not None and failures.append(err))
    assert producer.flush(30) == 0 and not failures, failures
    return group_values(conf, topic, f"{topic}-reader", len(RECORDS), timeout=30)


@pytest.mark.parametrize("method", ["callback", "oidc"])
def test_confluent_kafka(oauth: OAuth, method: str) -> None:
    client = "confluent-cb" if method == "callback" else "confluent-oidc"
    create_topic(oauth, f"oauth-{client}")
    before = oauth.idp.requests_of(client)
    assert librdkafka_roundtrip(oauth, oauth.login(client, method), f"oauth-{client}") == RECORDS
    assert oauth.idp.requests_of(client) > before  # the tokens came from the identity provider


def kcat_with_oidc(exe: str, workdir: Path) -> dict[str, str]:
    """The environment kcat runs in with a librdkafka that has OIDC (Debian's 2.0.2 is built
    without libcurl): its own if it has it, else confluent-kafka's bundled one."""
    if "oidc" in subprocess.run([exe, "-V"], capture_output=True, text=True, timeout=30).stdout:
        return dict(os.environ)
    return bundled_librdkafka_env(workdir)


def test_kcat_with_librdkafka_oidc(oauth: OAuth, tmp_path: Path) -> None:
    exe = shutil.which("kcat")
    assert exe is not None, "kcat is not installed (Debian: apt-get install -y kcat)"
    env = kcat_with_oidc(exe, tmp_path)
    create_topic(oauth, "oauth-kcat")
    base = [exe, "-b", oauth.bootstrap, *oauth.login("kcat").kcat_args()]

    def run(args: list[str], stdin: str | None = None) -> str:
        proc = subprocess.run([*base, *args], input=stdin, capture_output=True, text=True, timeout=60, env=env)
        assert proc.returncode == 0 and "ERROR" not in proc.stderr, f"kcat {args}: {proc.stderr[-3000:]}"
        return proc.stdout

    run(["-P", "-t", "oauth-kcat"], stdin="".join(f"{r.decode()}\n" for r in RECORDS))
    assert run(["-C", "-t", "oauth-kcat", "-o", "beginning", "-e", "-q"]).split() == [r.decode() for r in RECORDS]
    assert oauth.idp.requests_of("kcat") >= 2  # one token per kcat run


def test_kafka_python(oauth: OAuth) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    create_topic(oauth, "oauth-kafka-python")
    security = oauth.login("kafka-python").kafka_python()
    producer = KafkaProducer(bootstrap_servers=oauth.bootstrap, **security)
    try:
        for value in RECORDS:
            producer.send("oauth-kafka-python", value).get(timeout=30)
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer("oauth-kafka-python", bootstrap_servers=oauth.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=15000, **security)
    try:
        assert [m.value for m in consumer] == RECORDS
    finally:
        consumer.close()


def test_aiokafka(oauth: OAuth) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    create_topic(oauth, "oauth-aiokafka")

    async def scenario() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=oauth.bootstrap, **oauth.login("aiokafka").aiokafka())
        await producer.start()
        try:
            for value in RECORDS:
                await producer.send_and_wait("oauth-aiokafka", value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("oauth-aiokafka", bootstrap_servers=oauth.bootstrap,
                                    auto_offset_reset="earliest", **oauth.login("aiokafka").aiokafka())
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                while len(got) < len(RECORDS):
                    got.append((await consumer.getone()).value)
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(scenario()) == RECORDS


def test_kafka_cli_tools_with_command_config(oauth: OAuth, java_tools: JavaTools, tmp_path: Path) -> None:
    # Kafka 4.x's OAuthBearerLoginCallbackHandler fetches the tokens; its JVM must allow the URL.
    tools = java_tools.with_system_properties(oauth.allowed_urls)
    config = oauth.login("java-cli").write_java_properties(tmp_path / "client.properties")
    lines = [f"line-{i}" for i in range(5)]
    assert tools.roundtrip_with_config(oauth.bootstrap, config, "oauth-cli", lines) == lines
    assert oauth.idp.requests_of("java-cli") >= 3  # one per tool run


def refused_by_librdkafka(oauth: OAuth, token: str) -> tuple[list[KafkaError], list[object]]:
    """(the client's errors, its delivery reports) for one record produced with ``token``."""
    errors: list[KafkaError] = []
    reports: list[object] = []
    producer = Producer({"bootstrap.servers": oauth.bootstrap, **oauth.login("forged", "callback", token).librdkafka(),
                         "message.timeout.ms": 5000, "error_cb": errors.append})
    producer.produce("oauth-never", b"x", on_delivery=lambda err, _m: reports.append(err))
    producer.flush(15)
    return errors, reports


async def exchange_on_the_wire(port: int, token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """SaslHandshake, the client message, and (on an error answer) RFC 7628's ``^A``."""
    conn = await BrokerConnection.connect("127.0.0.1", port)
    try:
        handshake = await conn.request(ApiKey.SASL_HANDSHAKE, {"mechanism": "OAUTHBEARER"}, 1)
        assert handshake["error_code"] == ErrorCode.NONE and handshake["mechanisms"] == ["OAUTHBEARER"]
        first = await conn.request(ApiKey.SASL_AUTHENTICATE,
                                   {"auth_bytes": f"n,,\x01auth=Bearer {token}\x01\x01".encode()}, 2)
        final = await conn.request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": b"\x01"}, 2)
        with pytest.raises((ConnectionClosedError, OSError)):
            await conn.request(ApiKey.METADATA, {"topics": []}, 12, timeout=10)
        return first, final
    finally:
        await conn.close()


@pytest.mark.parametrize("forge", [
    pytest.param(lambda: sign(SigningKey("key-1", SigningKey.rsa("x").private), claims("mallory")),
                 id="wrong-signature"),
    pytest.param(None, id="expired"),
])
def test_an_invalid_token_is_refused_with_rfc7628s_error(oauth: OAuth, forge: Callable[[], str] | None) -> None:
    # An expired token is signed by the provider's real key: only its exp is wrong (past the skew).
    token = forge() if forge is not None else sign(oauth.idp.signing_key, claims("alice", now=time.time() - 7200))
    errors, reports = refused_by_librdkafka(oauth, token)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert 'SASL authentication error: {"status":"invalid_token"}' in errors[0].str()
    assert len(reports) == 1 and reports[0] is not None  # never delivered
    first, final = asyncio.run(exchange_on_the_wire(oauth.port, token))
    assert (first["error_code"], first["auth_bytes"]) == (ErrorCode.NONE, b'{"status":"invalid_token"}')
    assert (final["error_code"], final["error_message"]) == (ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                             '{"status":"invalid_token"}')
    oauth.broker.assert_alive()


def test_a_key_the_provider_rotated_in_is_fetched_when_a_token_names_it(oauth: OAuth) -> None:
    """The provider publishes a new key after the broker fetched the JWKS: the first token signed
    with it is refused, which makes the broker fetch the JWKS again at once (not after
    refresh.ms); the client's next attempt is accepted."""
    create_topic(oauth, "oauth-rotated")
    new_key = SigningKey.rsa(f"key-rotated-{time.time_ns()}")
    oauth.idp.keys.append(new_key)
    token = sign(new_key, claims("rotated"))
    errors: list[KafkaError] = []
    reports: list[object] = []
    producer = Producer({"bootstrap.servers": oauth.bootstrap,
                         **oauth.login("rotated", "callback", token).librdkafka(),
                         "message.timeout.ms": 30000, "error_cb": errors.append})
    producer.produce("oauth-rotated", b"signed-with-the-new-key", on_delivery=lambda err, _m: reports.append(err))
    assert producer.flush(40) == 0
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION  # the first attempt
    assert reports == [None]  # delivered once the broker had the key


class CollectingHandler(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.mark.parametrize("limit", ["token-lifetime", "connections.max.reauth.ms"])
def test_a_client_re_authenticates_on_the_same_connection(oauth: OAuth, limit: str) -> None:
    """The session lifetime is the token's remaining life, bounded by connections.max.reauth.ms
    (Kafka's rule). Tokens of 10 s: librdkafka must fetch a new token and re-authenticate
    (KIP-368) before the session runs out. Long-lived tokens on the listener with 4 s sessions:
    it re-authenticates every 4 s with the token it has. Either way it keeps producing over three
    session lifetimes and never opens a second connection to the broker."""
    client, port, lifetime_s = (("renewing", oauth.port, RENEWING_LIFETIME_S) if limit == "token-lifetime"
                                else ("confluent-oidc", oauth.reauth_port, REAUTH_MS / 1000))
    topic = f"oauth-reauth-{client}"
    create_topic(oauth, topic)
    tokens_before = oauth.idp.requests_of(client)
    stats: list[dict[str, Any]] = []
    failures: list[object] = []
    # librdkafka's broker debug log says when it starts a re-authentication ("Received REAUTH op").
    client_log = logging.getLogger(f"librdkafka.{topic}")
    client_log.propagate = False
    client_log.setLevel(logging.DEBUG)
    lines: list[str] = []
    client_log.addHandler(CollectingHandler(lines))
    producer = Producer({"bootstrap.servers": f"localhost:{port}", **oauth.login(client).librdkafka(),
                         "statistics.interval.ms": 1000, "stats_cb": lambda raw: stats.append(json.loads(raw)),
                         "message.timeout.ms": 10000, "error_cb": failures.append,
                         "debug": "broker", "logger": client_log})
    delivered = 0

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1
        else:
            failures.append(err)

    sent = 0
    deadline = time.monotonic() + 3 * lifetime_s + 2
    while time.monotonic() < deadline:
        producer.produce(topic, f"reauth-{sent}".encode(), on_delivery=on_delivery)
        sent += 1
        producer.poll(0.5)
    assert producer.flush(30) == 0
    producer.poll(1.5)  # one more statistics report
    assert not failures, failures
    assert delivered == sent
    # The broker announced the session lifetime and the client re-authenticated each time...
    assert sum("Received REAUTH op" in line for line in lines) >= 2
    if limit == "token-lifetime":  # ... with a new token at least every lifetime
        assert oauth.idp.requests_of(client) - tokens_before >= 3
    brokers = [b for b in stats[-1]["brokers"].values() if b["nodeid"] >= 0]
    assert brokers and all(b["connects"] == 1 and b["disconnects"] == 0 for b in brokers), \
        [(b["name"], b["connects"], b["disconnects"]) for b in brokers]
