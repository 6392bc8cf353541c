"""`riverlog broker` as a user starts it: a configuration that asks for security Riverlog does not
serve (Kerberos, delegation tokens, a custom principal builder, OAUTHBEARER's client side), a TLS
listener whose files do not load or an OAUTHBEARER listener without a JWKS to check tokens with
stops the process at once with a message naming every such property (it never listens, so nothing
is served in plaintext by mistake), and `--check-config` prints the effective configuration.

These exercise Riverlog's own command line, whatever RIVERLOG_TEST_TARGET says.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.brokers import free_ports, riverlog_env

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def riverlog_broker(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "riverlog", "broker", *args], capture_output=True, text=True,
                          timeout=60, env={**riverlog_env(), **(env or {})})  # this tree's broker_image


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_a_broker_asking_for_what_riverlog_cannot_honour_refuses_to_start(tmp_path: Path) -> None:
    port, metrics_port = free_ports(2)
    properties = tmp_path / "server.properties"
    properties.write_text(
        f"listeners=PLAINTEXT://127.0.0.1:{port}\n"
        f"log.dirs={tmp_path / 'data'}\n"
        "sasl.kerberos.service.name=kafka\n"
        "delegation.token.secret.key=token-signing-secret\n"
        "sasl.oauthbearer.token.endpoint.url=https://idp.example/token\n"
        "principal.builder.class=com.example.Builder\n")
    result = riverlog_broker("--config", str(properties), "--set", f"metrics.port={metrics_port}")
    assert result.returncode == 2, result.stderr
    for named in ("sasl.kerberos.service.name", "delegation.token.secret.key", "principal.builder.class",
                  "sasl.oauthbearer.token.endpoint.url"):
        assert named in result.stderr
    assert "token-signing-secret" not in result.stderr  # names, never values
    assert "Remove these properties" in result.stderr
    assert not listening(port) and not listening(metrics_port)
    assert not (tmp_path / "data").exists()  # refused before touching the data directory


def test_a_tls_listener_without_its_key_refuses_to_start_with_the_fix(tmp_path: Path) -> None:
    port, tls_port, metrics_port = free_ports(3)
    result = riverlog_broker("--set", f"listeners=PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{tls_port}",
                             "--set", f"log.dirs={tmp_path / 'data'}", "--set", f"metrics.port={metrics_port}",
                             "--set", "ssl.keystore.location=/nonexistent/broker.pem")
    assert result.returncode == 2, result.stderr
    assert "listener SSL: cannot load its TLS key, certificate or truststore" in result.stderr
    assert not listening(tls_port) and not listening(port)
    result = riverlog_broker("--set", f"listeners=PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{tls_port}",
                             "--set", f"log.dirs={tmp_path / 'data'}", "--set", "ssl.keystore.type=JKS",
                             "--set", "ssl.keystore.location=/etc/broker.jks")
    assert result.returncode == 2 and "Riverlog reads PEM only" in result.stderr


def test_an_oauthbearer_listener_without_a_jwks_refuses_to_start_with_the_fix(tmp_path: Path) -> None:
    port, sasl_port, metrics_port = free_ports(3)
    listeners = ["--set", f"listeners=PLAINTEXT://127.0.0.1:{port},SASL://127.0.0.1:{sasl_port}",
                 "--set", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
                 "--set", "listener.name.sasl.sasl.enabled.mechanisms=OAUTHBEARER",
                 "--set", f"log.dirs={tmp_path / 'data'}", "--set", f"metrics.port={metrics_port}"]
    result = riverlog_broker(*listeners)
    assert result.returncode == 2, result.stderr
    assert "listener SASL enables OAUTHBEARER but sasl.oauthbearer.jwks.endpoint.url is not set" in result.stderr
    assert "never accepts unsigned" in result.stderr
    assert not listening(sasl_port) and not listening(port)
    # Nor may the node authenticate to other brokers with OAUTHBEARER: it does not fetch tokens.
    result = riverlog_broker(*listeners, "--set", "sasl.oauthbearer.jwks.endpoint.url=file:/etc/jwks.json",
                             "--set", "inter.broker.listener.name=SASL",
                             "--set", "sasl.mechanism.inter.broker.protocol=OAUTHBEARER")
    assert result.returncode == 2 and "does not fetch tokens for itself" in result.stderr
    assert not (tmp_path / "data").exists()


def test_security_properties_from_the_environment_are_refused_too(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    result = riverlog_broker("--set", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--set", f"log.dirs={tmp_path}",
                             "--set", "delegation.token.secret.key=k",
                             env={"RIVERLOG_SASL_KERBEROS_SERVICE_NAME": "kafka"})
    # RIVERLOG_* variables set only properties Riverlog reads; the --set one is refused.
    assert result.returncode == 2 and "delegation.token.secret.key" in result.stderr
    assert "sasl.kerberos" not in result.stderr


def test_check_config_prints_every_property_with_its_source_and_exits(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("node.id=7\nnum.network.threads=3\n")
    result = riverlog_broker("--config", str(properties), "--set", "num.partitions=6", "--check-config",
                             env={"RIVERLOG_LOG_RETENTION_HOURS": "48"})
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split(None, 2)[1:] for line in result.stdout.splitlines()[1:] if line.strip()}
    assert rows["node.id"] == ["7", str(properties)]
    assert rows["num.partitions"] == ["6", "--set"]
    assert rows["log.retention.hours"] == ["48", "environment"]
    assert rows["num.network.threads"][1].endswith("(ignored: not used by Riverlog)")
    assert rows["log.segment.bytes"][1] == "default"
    assert result.stdout.splitlines()[0].split() == ["PROPERTY", "VALUE", "SOURCE"]
