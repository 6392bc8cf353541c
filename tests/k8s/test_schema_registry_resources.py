"""A Cluster's schema registry (issue #20, ``spec.schemaRegistry``) as the operator deploys it,
against a real API server.

As in ``test_operator.py``, the operator runs as a process and no pod ever runs (no kubelet):
the test plays the kubelet's part for readiness (``mark_pod_ready``). This module's operator
watches only ``opsr-*`` namespaces. The registry really running is the e2e tier's
(``tests/e2e/test_schema_registry_e2e.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.kube import KubeCluster, wait_until
from test_operator import OperatorProcess, apply, cluster_doc, condition, crds, get, merge_patch, operator_log

pytestmark = pytest.mark.k8s

# The fixtures, shared with test_operator.py (operator_log uses this module's operator).
__all__ = ["crds", "operator_log"]

WAIT = 90.0
PREFIX = "opsr"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def operator(kube: KubeCluster, crds: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    log_path = tmp_path_factory.mktemp("operator-sr") / "operator.log"
    proc = OperatorProcess(kube, log_path, "--standalone", "--namespace", f"{PREFIX}-*", "--verbose")
    yield proc
    proc.stop()


def registry_condition(kube: KubeCluster, name: str, namespace: str, reason: str, needle: str = "") -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        obj = get(kube, "rlc", name, namespace)
        found = condition(obj, "SchemaRegistryReady")
        return obj if found.get("reason") == reason and needle in found.get("message", "") else None

    obj: dict[str, Any] = wait_until(check, WAIT, f"Cluster {name}: SchemaRegistryReady reason {reason} {needle!r}")
    return obj


def template(deployment: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = deployment["spec"]["template"]
    return found


def test_the_operator_deploys_updates_and_removes_a_clusters_schema_registry(
        kube: KubeCluster, operator_log: OperatorProcess) -> None:
    namespace = kube.namespace(f"{PREFIX}-deploy")
    apply(kube, cluster_doc(namespace, replicas=1, schemaRegistry={
        "compatibilityLevel": "FULL", "config": {"kafkastore.topic": "_schemas_demo"},
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}}}))
    cluster = registry_condition(kube, "demo", namespace, "InstancesNotReady", "0/1 instances ready")
    uid = cluster["metadata"]["uid"]
    url = f"http://demo-schema-registry.{namespace}.svc:8081"
    assert cluster["status"]["schemaRegistry"]["url"] == url
    # The API server defaulted the rest of the block.
    assert cluster["spec"]["schemaRegistry"]["replicas"] == 1 and cluster["spec"]["schemaRegistry"]["enabled"]
    # The Cluster's own condition is not the registry's.
    assert condition(cluster, "Ready")["reason"] != "RegistryReady"

    for kind, child in (("configmap", "demo-schema-registry-config"), ("service", "demo-schema-registry"),
                        ("deployment", "demo-schema-registry")):
        obj = get(kube, kind, child, namespace)
        assert obj is not None, (kind, child)
        assert [(o["kind"], o["uid"], o.get("controller")) for o in obj["metadata"]["ownerReferences"]] == \
            [("Cluster", uid, True)]
        assert obj["metadata"]["labels"]["app.kubernetes.io/component"] == "schema-registry"
    properties = get(kube, "configmap", "demo-schema-registry-config", namespace)["data"][  # type: ignore[index]
        "schema-registry.properties"]
    assert f"kafkastore.bootstrap.servers=demo-bootstrap.{namespace}.svc:9092\n" in properties
    assert "schema.compatibility.level=full\n" in properties and "kafkastore.topic=_schemas_demo\n" in properties
    assert "listeners=http://0.0.0.0:8081\n" in properties
    deployment = get(kube, "deployment", "demo-schema-registry", namespace)
    assert deployment is not None and deployment["spec"]["replicas"] == 1
    (container,) = template(deployment)["spec"]["containers"]
    assert container["image"] == "riverlog:test"
    # Each instance advertises its pod IP to the others (writes are forwarded to the writer).
    assert container["command"][:2] == ["riverlog", "schema-registry"]
    assert "host.name=$(RIVERLOG_POD_IP)" in container["command"]
    assert {"name": "RIVERLOG_POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                                  "fieldPath": "status.podIP"}}} in container["env"]
    assert container["resources"] == {"requests": {"cpu": "50m", "memory": "128Mi"}}
    assert container["readinessProbe"]["httpGet"]["path"] == "/"
    annotations = template(deployment)["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == "8081" and annotations["prometheus.io/path"] == "/metrics"
    service = get(kube, "service", "demo-schema-registry", namespace)
    assert service is not None
    assert [(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [
        ("http", 8081, "http"), ("metrics", 9404, "http")]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    # The broker StatefulSet is not the registry's business: its pods do not carry its labels.
    sts = get(kube, "statefulset", "demo", namespace)
    assert sts is not None and "schema-registry" not in json.dumps(sts["spec"]["selector"])

    # The instance becomes ready (the test plays the kubelet): the status follows.
    def registry_pods() -> list[str]:
        out = kube.kubectl("get", "pods", "-n", namespace, "-l", "app.kubernetes.io/component=schema-registry",
                           "-o", "jsonpath={.items[*].metadata.name}").stdout.split()
        return out

    (pod,) = wait_until(registry_pods, WAIT, "the registry's pod")
    kube.mark_pod_ready(namespace, pod)
    cluster = registry_condition(kube, "demo", namespace, "RegistryReady", f"1/1 instances ready at {url}")
    assert condition(cluster, "SchemaRegistryReady")["status"] == "True"
    assert cluster["status"]["schemaRegistry"] == {"url": url, "replicas": 1, "readyReplicas": 1}
    header, row = kube.kubectl("get", "rlc", "demo", "-n", namespace, "-o", "wide").stdout.splitlines()[:2]
    assert header.split()[-3:-1] == ["REGISTRY", "REGISTRY-URL"] and row.split()[-3:-1] == ["1", url], (header, row)

    # Changed: more instances, another level, no metrics: the Deployment, ConfigMap and Service follow.
    first_hash = annotations["riverlog.dev/config-hash"]
    merge_patch(kube, "rlc", "demo", namespace, {"spec": {"schemaRegistry": {
        "replicas": 2, "compatibilityLevel": "BACKWARD_TRANSITIVE", "metrics": {"enabled": False}}}})

    def updated() -> dict[str, Any] | None:
        dep = get(kube, "deployment", "demo-schema-registry", namespace)
        return dep if dep and dep["spec"]["replicas"] == 2 and \
            template(dep)["metadata"]["annotations"]["riverlog.dev/config-hash"] != first_hash else None

    deployment = wait_until(updated, WAIT, "the registry's Deployment updated")
    assert "prometheus.io/scrape" not in template(deployment)["metadata"]["annotations"]
    properties = get(kube, "configmap", "demo-schema-registry-config", namespace)["data"][  # type: ignore[index]
        "schema-registry.properties"]
    assert "schema.compatibility.level=backward_transitive\n" in properties
    service = get(kube, "service", "demo-schema-registry", namespace)
    assert service is not None and [p["name"] for p in service["spec"]["ports"]] == ["http"]
    registry_condition(kube, "demo", namespace, "InstancesNotReady", "/2 instances ready")

    # The API server refuses what the operator owns, and security settings it does not wire.
    for key, needle in (("host.name", "config may not set what the operator owns"),
                        ("kafkastore.security.protocol", "the operator does not wire them"),
                        ("authentication.method", "the operator does not wire them")):
        proc = kube.kubectl("patch", "rlc", "demo", "-n", namespace, "--type=merge", "-p",
                            json.dumps({"spec": {"schemaRegistry": {"config": {key: "x"}}}}), check=False)
        assert proc.returncode != 0 and needle in proc.stderr, (key, proc.stderr)

    # Disabled: every object goes, and so do the status and the condition; the brokers stay.
    merge_patch(kube, "rlc", "demo", namespace, {"spec": {"schemaRegistry": {"enabled": False}}})
    wait_until(lambda: all(get(kube, kind, child, namespace) is None for kind, child in (
        ("deployment", "demo-schema-registry"), ("service", "demo-schema-registry"),
        ("configmap", "demo-schema-registry-config"))), WAIT, "the registry's objects deleted")
    cluster = wait_until(lambda: (c := get(kube, "rlc", "demo", namespace)) and
                         "schemaRegistry" not in c["status"] and c, WAIT, "status.schemaRegistry removed")
    assert condition(cluster, "SchemaRegistryReady") == {}
    assert get(kube, "statefulset", "demo", namespace) is not None
    # Back on, then the block removed altogether: gone again.
    merge_patch(kube, "rlc", "demo", namespace, {"spec": {"schemaRegistry": {"enabled": True}}})
    wait_until(lambda: get(kube, "deployment", "demo-schema-registry", namespace), WAIT, "the registry back")
    merge_patch(kube, "rlc", "demo", namespace, {"spec": {"schemaRegistry": None}})
    wait_until(lambda: get(kube, "deployment", "demo-schema-registry", namespace) is None
               and get(kube, "service", "demo-schema-registry", namespace) is None, WAIT,
               "the registry removed with its spec")


def test_a_registry_the_cluster_cannot_serve_is_reported_not_deployed(
        kube: KubeCluster, operator_log: OperatorProcess) -> None:
    namespace = kube.namespace(f"{PREFIX}-secured")
    # Only SCRAM over TLS: the registry's Kafka client has no TLS or SASL settings yet.
    apply(kube, cluster_doc(namespace, "locked", replicas=1, schemaRegistry={}, listeners=[
        {"name": "SCRAM", "port": 9094, "tls": True, "authentication": {"type": "scram-sha-512"}}]))
    cluster = registry_condition(kube, "locked", namespace, "KafkaSecurityUnsupported",
                                 "kafkastore.security.protocol")
    message = condition(cluster, "SchemaRegistryReady")["message"]
    assert "every listener of Cluster locked needs TLS or authentication" in message, message
    assert condition(cluster, "SchemaRegistryReady")["status"] == "False"
    assert "url" not in cluster["status"]["schemaRegistry"]  # null in the merge patch: removed
    # A plain listener beside it, but ACLs on: the registry would be User:ANONYMOUS.
    apply(kube, cluster_doc(namespace, "acls", replicas=1, schemaRegistry={}, authorization={}, listeners=[
        {"name": "PLAIN", "port": 9092}]))
    registry_condition(kube, "acls", namespace, "KafkaSecurityUnsupported", "authorization on")
    for name in ("locked", "acls"):
        assert get(kube, "deployment", f"{name}-schema-registry", namespace) is None
        assert get(kube, "service", f"{name}-schema-registry", namespace) is None
    # The sample the docs point to is valid.
    kube.kubectl("apply", "--dry-run=server", "-n", namespace, "-f",
                 str(ROOT / "examples" / "cluster-with-schema-registry.yaml"))
