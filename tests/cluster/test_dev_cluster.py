"""`riverlog dev --brokers 3`: a local three-broker cluster that real clients use as a cluster."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]


def test_dev_cluster_of_three_brokers_serves_a_replicated_topic(tmp_path: Path) -> None:
    # Three consecutive free ports for the brokers, three more for the controller quorum, below
    # the kernel's ephemeral range: there, the brokers' own outgoing connections (to each other's
    # controller ports, while they start) could take a port before the third broker binds it.
    first = _consecutive_free(3, avoid=())
    controller_first = _consecutive_free(3, avoid=range(first - 3, first + 4))
    registry_port = _consecutive_free(1, avoid=range(min(first, controller_first) - 3,
                                                     max(first, controller_first) + 4))
    env = {**os.environ, "PYTHONPATH": str(REPO / "broker_image")}
    log_path = tmp_path / "dev.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "riverlog", "dev", "--brokers", "3", "--data", str(tmp_path / "data"),
             "--port", str(first),
             "--controller-port", str(controller_first), "--metrics-port", "0", "--advertised-host", "127.0.0.1",
             "--schema-registry-port", str(registry_port)],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while b"dev cluster of 3 brokers ready" not in log_path.read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.2)
        bootstrap = f"127.0.0.1:{first}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        assert sorted(admin.list_topics(timeout=10).brokers) == [1, 2, 3]
        admin.create_topics([NewTopic("replicated", 3, 3)])["replicated"].result(15)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
        for i in range(300):
            producer.produce("replicated", key=str(i).encode(), value=b"v%d" % i)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dev", "enable.auto.commit": False})
        consumer.assign([TopicPartition("replicated", p, 0) for p in range(3)])
        seen = set()
        end = time.monotonic() + 30
        while len(seen) < 300 and time.monotonic() < end:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.add(msg.value())
        consumer.close()
        assert seen == {b"v%d" % i for i in range(300)}

        _check_registry(f"http://127.0.0.1:{registry_port}", log_path)

        out = subprocess.run([sys.executable, "-m", "riverlog", "cluster", "describe", "--bootstrap-server",
                              bootstrap, "--output", "json"], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        described = json.loads(out.stdout)
        assert [b["id"] for b in described["brokers"]] == [1, 2, 3]
        # The topic's three partitions and the registry's one-partition _schemas.
        assert described["partitions"] == 4 and described["under_replicated"] == 0
        leaders = {r["leader"] for r in described["partition_details"]}
        assert leaders == {1, 2, 3}, "leadership is spread over the brokers"
        assert all(sorted(r["isr"]) == [1, 2, 3] for r in described["partition_details"])
        # The metadata quorum: three voters, one of them the leader (normally also the named
        # controller, unless an election happened between the two requests).
        quorum = described["quorum"]
        assert quorum["leader"] in (1, 2, 3)
        assert sorted(r["id"] for r in quorum["replicas"]) == [1, 2, 3]
        assert [r["role"] for r in quorum["replicas"]].count("leader") == 1
        assert all(r["log_end_offset"] > 0 for r in quorum["replicas"])
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    assert proc.returncode == 0, log_path.read_text()[-3000:]
    # Every broker kept its replicas under the data directory.
    for n in (1, 2, 3):
        assert (tmp_path / "data" / f"broker{n}" / "replicated-0").is_dir()


def _check_registry(url: str, log_path: Path) -> None:
    """The registry inside the first broker: named in the ready line, it registers a schema
    (stored in the cluster's _schemas, replicated to all three brokers) and serves it back."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    assert f"schema registry {url}" in log_path.read_text()
    client = SchemaRegistryClient({"url": url})
    schema = Schema('{"type": "record", "name": "Dev", "fields": [{"name": "n", "type": "long"}]}', "AVRO")
    deadline = time.monotonic() + 30
    while True:  # the registry starts after the brokers are ready, and elects its writer
        try:
            schema_id = client.register_schema("dev-value", schema)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    assert client.get_latest_version("dev-value").schema_id == schema_id
    assert '"Dev"' in client.get_schema(schema_id).schema_str
    bootstrap = log_path.read_text().split("bootstrap ")[1].split(",")[0]
    topic = AdminClient({"bootstrap.servers": bootstrap}).list_topics("_schemas", timeout=10).topics["_schemas"]
    assert topic.error is None
    assert [len(p.replicas) for p in topic.partitions.values()] == [3], "_schemas has a copy on every broker"


def _free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _consecutive_free(count: int, avoid: range | tuple[()]) -> int:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.Random()
    while True:
        first = rng.randrange(10000, max(10001, low - count))
        if first not in avoid and all(_free(first + i) for i in range(count)):
            return first
