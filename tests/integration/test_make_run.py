"""`make run` on a fresh clone sets itself up and serves a real client on loopback only (the
broker has no authentication yet, so other interfaces are an explicit choice); Ctrl-C stops it
cleanly."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from support.brokers import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]


def accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def test_make_run_on_a_fresh_clone_serves_a_client(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    # The clone gets the working tree's uncommitted files too, so the test checks what is here.
    for rel in subprocess.run(["git", "ls-files", "--modified", "--others", "--exclude-standard"],
                              cwd=REPO, capture_output=True, text=True, check=True).stdout.split():
        src = REPO / rel
        if src.is_file():
            (clone / rel).parent.mkdir(parents=True, exist_ok=True)
            (clone / rel).write_bytes(src.read_bytes())
    port, metrics_port, registry_port = free_port(), free_port(), free_port()
    log_path = tmp_path / "make-run.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(["make", "run", f"PORT={port}", f"METRICS_PORT={metrics_port}",
                                 f"SCHEMA_REGISTRY_PORT={registry_port}"],
                                cwd=clone, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        bootstrap = f"localhost:{port}"
        deadline = time.monotonic() + 600  # the first run installs the virtualenv
        producer = None
        while time.monotonic() < deadline:
            assert proc.poll() is None, log_path.read_text()[-3000:]
            if b"ready in" in log_path.read_bytes():
                producer = Producer({"bootstrap.servers": bootstrap})
                break
            time.sleep(1)
        assert producer is not None, "make run did not start a broker:\n" + log_path.read_text()[-3000:]
        producer.produce("hello-make-run", key=b"k", value=b"served")  # auto-creates the topic
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "make-run", "enable.auto.commit": False})
        consumer.assign([TopicPartition("hello-make-run", 0, 0)])
        msg = None
        for _ in range(40):
            msg = consumer.poll(0.5)
            if msg is not None:
                break
        consumer.close()
        assert msg is not None and msg.error() is None and msg.value() == b"served"
        assert (clone / "data" / "hello-make-run-0").is_dir(), "data is kept in ./data of the checkout"
        # Bound to 127.0.0.1 itself, not to every interface: another loopback address (which an
        # all-interfaces socket would answer) is refused, for the Kafka port and for metrics.
        # The schema registry runs in the broker process and prints its URL.
        registry_url = f"http://127.0.0.1:{registry_port}"
        deadline = time.monotonic() + 60
        while b"schema registry ready" not in log_path.read_bytes().lower():
            assert time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.5)
        assert f"http://localhost:{registry_port}".encode() in log_path.read_bytes()  # the URL printed
        with urllib.request.urlopen(registry_url + "/subjects", timeout=10) as answer:
            assert json.loads(answer.read()) == []
        for listened in (port, metrics_port, registry_port):
            assert accepts("127.0.0.1", listened)
            assert not accepts("127.0.0.2", listened), f"port {listened} answers on other addresses"
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    assert "shutting down broker" in log_path.read_text()
