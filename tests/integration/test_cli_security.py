"""Riverlog's own client on secured listeners (issue #17): every client command takes
``--command-config FILE`` with Kafka's client properties, and ``riverlog users`` manages SCRAM
users. Checked on both targets: the CLI is a Kafka client, so it must work against Apache Kafka.

One broker for the module with three listeners: PLAINTEXT (the harness's), ``SECURE``
(SASL_SSL with SCRAM-SHA-512) and ``MTLS`` (SSL, client certificates required). The
``--command-config`` files are the very files Kafka's own tools read (``write_java_properties``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.brokers import BrokerProcess
from support.certs import Authority, TestPki, pem_cert
from support.client_security import ClientSecurity
from support.clients import wait_until
from support.java_tools import JavaTools

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "broker_image")}
    env.pop("RIVERLOG_BOOTSTRAP", None)
    return subprocess.run([sys.executable, "-m", "riverlog", *args], input=stdin, capture_output=True, text=True,
                          timeout=60, env=env)


def ok(*args: str, stdin: str | None = None) -> str:
    result = cli(*args, stdin=stdin)
    assert result.returncode == 0, f"riverlog {' '.join(args)} exited {result.returncode}:\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout


class Secured:
    def __init__(self, broker: BrokerProcess, pki: TestPki, secure_port: int, mtls_port: int,
                 directory: Path) -> None:
        self.broker, self.pki, self.directory = broker, pki, directory
        self.secure = f"localhost:{secure_port}"
        self.mtls = f"localhost:{mtls_port}"

    def config(self, name: str, security: ClientSecurity) -> str:
        return str(security.write_java_properties(self.directory / f"{name}.properties"))

    def scram(self, user: str, password: str) -> ClientSecurity:
        return ClientSecurity("SASL_SSL", ca=self.pki.truststore, mechanism="SCRAM-SHA-512", username=user,
                              password=password)


@pytest.fixture(scope="module")
def secured(module_broker_factory, tmp_path_factory) -> Secured:
    pki = TestPki.create(tmp_path_factory.mktemp("pki"))
    tls = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker_keystore),
           "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.truststore)}
    broker: BrokerProcess = module_broker_factory(start=False, overrides={
        **{f"listener.name.secure.{k}": v for k, v in tls.items()},
        **{f"listener.name.mtls.{k}": v for k, v in tls.items()},
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.secure.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.secure.scram-sha-512.sasl.jaas.config": SCRAM_LOGIN})
    secure_port = broker.add_listener("SECURE", "SASL_SSL", advertised_host="localhost")
    mtls_port = broker.add_listener("MTLS", "SSL", advertised_host="localhost")
    broker.start()
    return Secured(broker, pki, secure_port, mtls_port, tmp_path_factory.mktemp("client-configs"))


def logs_in(secured: Secured, config: str) -> bool:
    return cli("topics", "list", "--bootstrap-server", secured.secure, "--command-config", config).returncode == 0


def test_users_made_by_the_cli_log_in_over_sasl_ssl(secured: Secured, java_tools: JavaTools) -> None:
    plain = secured.broker.bootstrap
    ok("users", "create", "carol", "--password", "-", "--bootstrap-server", plain, stdin="carol-secret\n")
    listed = [json.loads(line) for line in
              ok("users", "list", "carol", "--bootstrap-server", plain, "--output", "json").splitlines()]
    assert listed == [{"user": "carol", "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}]}]
    carol = secured.config("carol", secured.scram("carol", "carol-secret"))
    wait_until(lambda: logs_in(secured, carol), timeout=30, message="carol logs in over SASL_SSL")

    ok("topics", "create", "cli-secure", "--partitions", "1", "--replication-factor", "1",
       "--bootstrap-server", secured.secure, "--command-config", carol)
    ok("produce", "cli-secure", "--bootstrap-server", secured.secure, "--command-config", carol,
       stdin="".join(f"line-{i}\n" for i in range(5)))
    out = ok("consume", "cli-secure", "--bootstrap-server", secured.secure, "--command-config", carol,
             "--from-beginning", "--max-messages", "5", "--timeout-ms", "20000", "--output", "json")
    assert [json.loads(line)["value"] for line in out.splitlines()] == [f"line-{i}" for i in range(5)]
    # Kafka's own tools (Java kafka-clients) with the same --command-config file.
    lines = [f"java-{i}" for i in range(3)]
    assert java_tools.roundtrip_with_config(secured.secure, Path(carol), "cli-secure-java", lines) == lines

    ok("users", "delete", "carol", "--bootstrap-server", secured.secure, "--command-config", carol)
    wait_until(lambda: not logs_in(secured, carol), timeout=30, message="carol's login refused once deleted")
    assert ok("users", "list", "--bootstrap-server", plain).count("carol") == 0


def test_a_wrong_password_is_one_clear_line(secured: Secured) -> None:
    ok("users", "create", "dave", "--password", "dave-secret", "--bootstrap-server", secured.broker.bootstrap)
    good = secured.config("dave", secured.scram("dave", "dave-secret"))
    wait_until(lambda: logs_in(secured, good), timeout=30, message="dave logs in")
    wrong = secured.config("dave-wrong", secured.scram("dave", "not-the-password"))
    result = cli("topics", "list", "--bootstrap-server", secured.secure, "--command-config", wrong)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "SASL_AUTHENTICATION_FAILED" in result.stderr and "--command-config" in result.stderr, result.stderr


def test_mutual_tls_and_an_untrusted_broker(secured: Secured, tmp_path: Path) -> None:
    client = secured.pki.client("cli-client")
    mtls = secured.config("mtls", ClientSecurity("SSL", ca=secured.pki.truststore, keystore=client.keystore))
    ok("topics", "create", "cli-mtls", "--partitions", "1", "--replication-factor", "1",
       "--bootstrap-server", secured.mtls, "--command-config", mtls)
    assert "cli-mtls" in ok("topics", "list", "--bootstrap-server", secured.mtls, "--command-config", mtls)
    # A truststore with another CA: the broker's certificate is not trusted, said in one line.
    stranger = tmp_path / "other-ca.pem"
    stranger.write_bytes(pem_cert(Authority.create("Stranger CA").cert))
    untrusted = secured.config("untrusted", ClientSecurity("SSL", ca=stranger, keystore=client.keystore))
    result = cli("topics", "list", "--bootstrap-server", secured.mtls, "--command-config", untrusted)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "TLS handshake failed" in result.stderr and "ssl.truststore.location" in result.stderr, result.stderr


def test_a_command_config_that_cannot_work_is_a_usage_error(secured: Secured, tmp_path: Path) -> None:
    missing = cli("topics", "list", "--bootstrap-server", secured.secure, "--command-config",
                  str(tmp_path / "nope.properties"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    gssapi = tmp_path / "gssapi.properties"
    gssapi.write_text("security.protocol=SASL_SSL\nsasl.jaas.config=x required;\n")
    result = cli("topics", "list", "--bootstrap-server", secured.secure, "--command-config", str(gssapi))
    assert result.returncode == 2 and "sasl.mechanism=GSSAPI" in result.stderr, result.stderr
