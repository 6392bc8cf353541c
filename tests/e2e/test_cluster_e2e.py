"""Acceptance scenario 1 of issue #7 on the e2e test node: the chart installed with helm, a
3-broker Cluster and a Topic with RF=3 become Ready, brokers find each other through the
operator's Services, and a confluent-kafka producer and consumer group work through the bootstrap
address (the clients run in a Pod, where the Service names resolve)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from node_agent.agent import NodeAgent
from support.kube import KubeCluster, wait_until

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
WAIT = 300.0

CLIENT = r"""
import sys, uuid
from confluent_kafka import Consumer, Producer
bootstrap, topic = sys.argv[1], sys.argv[2]
acked = []
producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
for i in range(300):
    producer.produce(topic, key=str(i % 7).encode(), value=f"v{i}".encode(),
                     on_delivery=lambda err, msg: acked.append(msg.value()) if err is None else None)
assert producer.flush(60) == 0, "unflushed"
assert len(acked) == 300, len(acked)
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-" + uuid.uuid4().hex[:6],
                     "auto.offset.reset": "earliest"})
consumer.subscribe([topic])
seen = set()
import time
deadline = time.monotonic() + 120
while len(seen) < 300 and time.monotonic() < deadline:
    msg = consumer.poll(1.0)
    if msg is not None and msg.error() is None:
        seen.add(msg.value())
consumer.commit(asynchronous=False)
consumer.close()
assert seen == set(acked), (len(seen), len(acked))
print("E2E-OK", len(seen), flush=True)
"""


def get(kube: KubeCluster, kind: str, name: str, ns: str) -> dict[str, Any] | None:
    proc = kube.kubectl("get", kind, name, "-n", ns, "-o", "json", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def condition(obj: dict[str, Any] | None, type_: str) -> str:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return str(c["status"])
    return ""


def test_chart_cluster_and_topic_become_ready_and_clients_work(kube: KubeCluster, node: NodeAgent) -> None:
    ns = kube.namespace("e2e-cluster")
    kube.helm("install", "riverlog", str(ROOT / "charts" / "riverlog"), "-n", ns, "--wait=false",
              "--set", f"operator.watchNamespaces={{{ns}}}", "--set", "operator.verbose=true",
              "--set", "operator.readinessProbe.periodSeconds=2", timeout=180)
    cluster = {"apiVersion": "riverlog.dev/v1alpha1", "kind": "Cluster", "metadata": {"name": "demo"},
               "spec": {"replicas": 3, "storage": {"size": "1Gi", "deleteClaim": True},
                        "config": {"default.replication.factor": 3, "min.insync.replicas": 2}}}
    topic = {"apiVersion": "riverlog.dev/v1alpha1", "kind": "Topic", "metadata": {"name": "orders"},
             "spec": {"clusterRef": {"name": "demo"}, "partitions": 3, "replicationFactor": 3,
                      "config": {"min.insync.replicas": 2}}}
    kube.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                 "items": [cluster, topic]}))
    wait_until(lambda: condition(get(kube, "cluster", "demo", ns), "Ready") == "True", WAIT, "Cluster Ready")
    wait_until(lambda: condition(get(kube, "topic", "orders", ns), "Ready") == "True", WAIT, "Topic Ready")
    pvcs = json.loads(kube.kubectl("get", "pvc", "-n", ns, "-o", "json").stdout)["items"]
    assert len(pvcs) == 3 and all(p["status"]["phase"] == "Bound" for p in pvcs)
    client = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client"},
              "spec": {"restartPolicy": "Never", "containers": [{
                  "name": "client", "image": "none",
                  "command": [Path(sys.executable).name, "-c", CLIENT, f"demo-bootstrap.{ns}.svc:9092", "orders"]}]}}
    kube.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(client))
    pod = wait_until(
        lambda: (p := get(kube, "pod", "client", ns)) and p["status"].get("phase") in ("Succeeded", "Failed") and p,
        WAIT, "client pod finished")
    runs = [r for r in node.pods.values() if r.key == f"{ns}/client"]
    log = (runs[0].directory / "client.log").read_text() if runs else ""
    assert pod["status"]["phase"] == "Succeeded", log
    assert "E2E-OK 300" in log
