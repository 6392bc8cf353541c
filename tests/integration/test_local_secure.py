"""The secured local start in one command (issue #17): ``riverlog local-secure`` (``make
run-secure``) serves SASL_SSL only, makes its CA, certificate and admin user on the first start
and keeps them across restarts, and the ``client.properties`` it writes is all a client needs:
Riverlog's CLI, librdkafka and Kafka's own tools connect with it. Plaintext gets nowhere.
Riverlog's own command, so it fails under RIVERLOG_TEST_TARGET=kafka."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.brokers import BROKER_IMAGE, free_ports
from support.clients import wait_until
from support.java_tools import JavaTools

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def riverlog(*args: str, **kwargs: object) -> list[str]:
    return [sys.executable, "-m", "riverlog", *args]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(BROKER_IMAGE)}


def cli_ok(*args: str) -> str:
    result = subprocess.run(riverlog(*args), capture_output=True, text=True, timeout=60, env=env())
    assert result.returncode == 0, result.stderr
    return result.stdout


def start(data: Path, ports: list[int], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(riverlog("local-secure", "--data", str(data), "--port", str(ports[0]),
                                         "--controller-port", str(ports[1]), "--metrics-port", str(ports[2])),
                                stdout=out, stderr=subprocess.STDOUT, env=env(), start_new_session=True)


def stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_one_command_starts_a_secured_broker(broker_target: str, java_tools: JavaTools, tmp_path: Path) -> None:
    if broker_target == "kafka":
        pytest.fail("riverlog local-secure is Riverlog's own command; there is no Kafka equivalent to check")
    data, log = tmp_path / "data", tmp_path / "local-secure.log"
    ports = free_ports(3)
    bootstrap = f"localhost:{ports[0]}"
    proc = start(data, ports, log)
    try:
        wait_until(lambda: b"ready in" in log.read_bytes() or proc.poll() is not None, timeout=60,
                   message="the secured broker starts")
        assert proc.poll() is None, log.read_text()[-3000:]
        config = data / "tls" / "client.properties"
        assert f"--command-config {config}" in log.read_text()
        assert oct((data / "tls" / "broker.pem").stat().st_mode & 0o777) == "0o600"
        # The admin user exists once the first controller recorded it: retry the first login.
        wait_until(lambda: subprocess.run(riverlog("topics", "list", "--bootstrap-server", bootstrap,
                                                   "--command-config", str(config)),
                                          capture_output=True, env=env(), timeout=60).returncode == 0,
                   timeout=30, message="the admin logs in with client.properties")
        cli_ok("topics", "create", "secured", "--partitions", "1", "--bootstrap-server", bootstrap,
               "--command-config", str(config))
        lines = [f"line-{i}" for i in range(3)]
        assert java_tools.roundtrip_with_config(bootstrap, config, "secured-java", lines) == lines

        # Plaintext on the secured port gets no Kafka answer.
        with socket.create_connection(("127.0.0.1", ports[0]), timeout=5) as sock:
            sock.sendall(b"\x00\x00\x00\x0b\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00\x00")
            sock.settimeout(5)
            received = sock.recv(64)
        assert received == b"" or received[0] in range(20, 25)  # at most a TLS alert

        stop(proc)
        password = (data / "tls" / "admin.password").read_text()
        proc = start(data, ports, log)  # a restart keeps the CA and the password
        wait_until(lambda: log.read_text().count("ready in") == 2, timeout=60, message="the restart")
        assert (data / "tls" / "admin.password").read_text() == password
        assert "secured" in cli_ok("topics", "list", "--bootstrap-server", bootstrap, "--command-config", str(config))
    finally:
        stop(proc)
