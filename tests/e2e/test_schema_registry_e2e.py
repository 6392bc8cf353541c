"""Issue #20 acceptance 6: a Cluster's schema registry (``spec.schemaRegistry``) deployed by the
chart's operator and actually running on the test node (``riverlog schema-registry`` from the
broker image's program), used by an application in a Pod.

One installation, one one-broker Cluster with two registry instances (level FULL). A client Pod
registers an Avro schema through the registry's Service with confluent-kafka's
``SchemaRegistryClient`` and ``AvroSerializer``, produces records through the Cluster, reads them
back with ``AvroDeserializer`` (which fetches the writer's schema by id), and is refused an
incompatible schema (409). It also registers a subject through each instance's own address: one of
the two is not the writer and forwards the write to the writer at the address it advertises (its
pod IP), and each id is then read from the other instance. Finally the spec is removed and the
registry's objects go.

On the test node a Service name resolves straight to one of its pods (no ClusterIP, no port
mapping), so ``/metrics`` is read on the REST port (what the Service's ``metrics`` port targets).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from chart_install import install_chart
from node_agent.agent import NodeAgent
from pod_clients import _COMMON
from support.kube import KubeCluster, wait_until
from test_connect_e2e import Installation, ready

pytestmark = pytest.mark.e2e

WAIT = 300.0
API = "riverlog.dev/v1alpha1"
CLUSTER = "sr"
TOPIC, RECORDS = "payments", 50

# Registers, produces, consumes and checks through the registry at argv[1] and the Cluster at
# argv[2]; argv[4:] are the instances' own URLs.
AVRO_APP = _COMMON + r"""
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

url, bootstrap, topic, instances = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
V1 = {"type": "record", "name": "Payment", "namespace": "shop",
      "fields": [{"name": "id", "type": "int"}, {"name": "amount", "type": "double"}]}
# FULL refuses it: a new field without a default (old data has none).
BREAKING = {**V1, "fields": V1["fields"] + [{"name": "currency", "type": "string"}]}
client = SchemaRegistryClient({"url": url})
context = SerializationContext(topic, MessageField.VALUE)
serialize = AvroSerializer(client, json.dumps(V1))
producer = Producer({**CONF, "bootstrap.servers": bootstrap, "acks": "all"})
for i in range(50):
    producer.produce(topic, key=str(i).encode(), value=serialize({"id": i, "amount": i * 1.5}, context))
assert producer.flush(60) == 0, "unflushed"
latest = client.get_latest_version(f"{topic}-value")
say("REGISTERED", {"subject": latest.subject, "version": latest.version, "id": latest.schema_id,
                   "level": client.get_compatibility()})

deserialize = AvroDeserializer(client)
consumer = Consumer({**CONF, "bootstrap.servers": bootstrap, "group.id": "avro-" + uuid.uuid4().hex[:6],
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
consumer.subscribe([topic])
values, deadline = [], time.monotonic() + 120
while len(values) < 50 and time.monotonic() < deadline:
    msg = consumer.poll(1.0)
    if msg is not None and msg.error() is None:
        values.append(deserialize(msg.value(), context))
consumer.close()

try:
    AvroSerializer(client, json.dumps(BREAKING))({"id": 1, "amount": 1.0, "currency": "EUR"}, context)
    refused = None
except SchemaRegistryError as exc:
    refused = exc.http_status_code

# Through each instance: a write there (forwarded when it is not the writer), read by id on the other.
direct = []
for index, own in enumerate(instances):
    here = SchemaRegistryClient({"url": own})
    schema = Schema(json.dumps({"type": "enum", "name": f"Direct{index}", "symbols": ["A", "B"]}), "AVRO")
    schema_id = here.register_schema(f"direct-{index}", schema)
    other_url = instances[(index + 1) % len(instances)]
    found, until = None, time.monotonic() + 60
    while found is None and time.monotonic() < until:
        try:
            # A fresh client each time: nothing cached. The other instance may not have read the
            # write yet when this one was the writer; it catches up from _schemas.
            found = SchemaRegistryClient({"url": other_url}).get_schema(schema_id).schema_str
        except SchemaRegistryError:
            time.sleep(0.5)
    direct.append({"via": own, "id": schema_id, "read_on": other_url, "found": found})
say("FINAL", {"values": values, "refused": refused, "direct": direct})
"""

# GETs paths of the registry and prints each answer.
HTTP = r"""
import json, sys, urllib.error, urllib.request
base = sys.argv[1]
for path in sys.argv[2:]:
    try:
        with urllib.request.urlopen(base + path, timeout=20) as answer:
            raw = answer.read().decode(errors="replace")
            body = json.loads(raw) if "json" in answer.headers.get("Content-Type", "") else raw
            out = {"path": path, "code": answer.status, "body": body}
    except urllib.error.HTTPError as exc:
        out = {"path": path, "code": exc.code, "body": exc.read().decode(errors="replace")}
    print("HTTP", json.dumps(out, sort_keys=True), flush=True)
print("FINAL", json.dumps({"paths": len(sys.argv) - 2}), flush=True)
"""


def cluster_doc(registry: dict[str, Any] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": 1, "storage": {"size": "1Gi", "deleteClaim": True},
                            "config": {"offsets.topic.replication.factor": 1, "default.replication.factor": 1,
                                       "transaction.state.log.replication.factor": 1,
                                       "transaction.state.log.min.isr": 1}}
    if registry is not None:
        spec["schemaRegistry"] = registry
    return {"apiVersion": API, "kind": "Cluster", "metadata": {"name": CLUSTER}, "spec": spec}


def registry_ready(obj: dict[str, Any] | None) -> bool:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == "SchemaRegistryReady":
            return bool(c["status"] == "True")
    return False


@pytest.fixture(scope="module")
def inst(kube: KubeCluster, node: NodeAgent | None) -> Iterator[Installation]:
    ns = kube.namespace("e2e-sr")
    install_chart(kube, "riverlog-sr", ns)
    found = Installation(kube, node, ns)
    yield found
    kube.kubectl("delete", "cluster", "--all", "-n", ns, "--timeout=180s", "--ignore-not-found", check=False)


def test_an_application_registers_and_uses_schemas_through_the_clusters_registry(inst: Installation) -> None:
    inst.apply(cluster_doc({"replicas": 2, "compatibilityLevel": "FULL"}))
    inst.wait_ready("cluster", CLUSTER)
    cluster = wait_until(lambda: (c := inst.get("cluster", CLUSTER)) and registry_ready(c) and c, WAIT,
                         "SchemaRegistryReady")
    url = f"http://{CLUSTER}-schema-registry.{inst.ns}.svc:8081"
    assert cluster["status"]["schemaRegistry"] == {"url": url, "replicas": 2, "readyReplicas": 2}, cluster["status"]
    assert ready(cluster)[0] == "True"
    pods = json.loads(inst.kube.kubectl("get", "pods", "-n", inst.ns, "-l",
                                        "app.kubernetes.io/component=schema-registry", "-o", "json").stdout)["items"]
    ips = sorted(p["status"]["podIP"] for p in pods if p["status"].get("podIP"))
    assert len(ips) == 2, [p["status"] for p in pods]

    app = inst.client("avro", AVRO_APP, url, inst.bootstrap(CLUSTER), TOPIC,
                      *(f"http://{ip}:8081" for ip in ips)).finish(300)
    final: dict[str, Any] = app.last("FINAL")
    log = inst.client("http", HTTP, url, "/subjects", "/config", "/metrics").finish(120)
    # Registered by the serializer through the Service, at the level the spec gave.
    assert app.last("REGISTERED") == {"subject": f"{TOPIC}-value", "version": 1, "id": 1, "level": "FULL"}, \
        app.last("REGISTERED")
    assert final["values"] == [{"id": i, "amount": i * 1.5} for i in range(RECORDS)], final["values"][:3]
    assert final["refused"] == 409, final
    # Both instances took a write and served the other's: forwarding to the writer's pod IP works.
    for item in final["direct"]:
        assert item["found"] is not None and "Direct" in item["found"], final["direct"]
    answers = {a["path"]: a for a in log.all("HTTP")}
    assert sorted(answers["/subjects"]["body"]) == ["direct-0", "direct-1", f"{TOPIC}-value"], answers
    assert answers["/config"]["body"] == {"compatibilityLevel": "FULL"}, answers
    assert "riverlog_schema_registry_schemas 3.0" in answers["/metrics"]["body"], answers["/metrics"]["body"][-1500:]

    # The spec removed: the registry's Deployment, Service and ConfigMap go, the Cluster stays Ready.
    inst.apply(cluster_doc(None))
    wait_until(lambda: all(inst.get(kind, name) is None for kind, name in (
        ("deployment", f"{CLUSTER}-schema-registry"), ("service", f"{CLUSTER}-schema-registry"),
        ("configmap", f"{CLUSTER}-schema-registry-config"))), WAIT, "the registry's objects deleted")
    wait_until(lambda: not json.loads(inst.kube.kubectl(
        "get", "pods", "-n", inst.ns, "-l", "app.kubernetes.io/component=schema-registry", "-o", "json").stdout
    )["items"], WAIT, "the registry's pods gone")
    assert ready(inst.get("cluster", CLUSTER))[0] == "True"
