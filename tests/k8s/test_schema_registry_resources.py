"""A Cluster's schema registry (issue #20, ``spec.schemaRegistry``) as the operator deploys it,
against a real API server.

As in ``test_operator.py``, the operator runs as a process and no pod ever runs (no kubelet):
the test plays the kubelet's part for readiness (``mark_pod_ready``). This module's operator
watches only ``opsr-*`` namespaces. The registry really running is the e2e tier's
(``tests/e2e/test_schema_registry_e2e.py``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
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

    # The API server refuses what the operator owns, and security settings it sets from the spec.
    for key, needle in (("host.name", "config may not set what the operator owns"),
                        ("riverlog.metrics.authentication", "config may not set what the operator owns"),
                        ("kafkastore.security.protocol", "the operator sets them from tls, basicAuth"),
                        ("authentication.method", "the operator sets them from tls, basicAuth")):
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


def test_on_a_secured_cluster_the_registry_connects_as_its_user_serves_https_and_asks_for_credentials(
        kube: KubeCluster, operator_log: OperatorProcess) -> None:
    namespace = kube.namespace(f"{PREFIX}-secured")
    # Only SCRAM over TLS, and no authentication given: nothing deployed, the condition says what to add.
    apply(kube, cluster_doc(namespace, "locked", replicas=1, schemaRegistry={}, listeners=[
        {"name": "SCRAM", "port": 9094, "tls": True, "authentication": {"type": "scram-sha-512"}}]))
    cluster = registry_condition(kube, "locked", namespace, "KafkaAuthenticationNeeded",
                                 "every listener of Cluster locked authenticates its clients")
    assert "add spec.schemaRegistry.authentication" in condition(cluster, "SchemaRegistryReady")["message"]
    assert "url" not in cluster["status"]["schemaRegistry"]  # null in the merge patch: removed
    assert get(kube, "deployment", "locked-schema-registry", namespace) is None

    merge_patch(kube, "rlc", "locked", namespace, {"spec": {"schemaRegistry": {
        "authentication": {"type": "scram-sha-512", "userRef": {"name": "schema-registry"}}, "tls": {},
        "basicAuth": {"usersSecret": {"name": "sr-users"}, "roles": ["admin"]}}}})
    registry_condition(kube, "locked", namespace, "UserNotFound", "no User 'schema-registry'")
    (user,) = [doc for doc in yaml.safe_load_all((ROOT / "examples" / "secured-cluster-with-schema-registry.yaml")
                                                 .read_text()) if doc["kind"] == "User"]
    user["metadata"]["namespace"] = namespace
    user["spec"]["clusterRef"]["name"] = "locked"
    apply(kube, user)
    # The User's Secret comes from its handler; the users file's Secret is not there yet.
    cluster = registry_condition(kube, "locked", namespace, "SecretsMissing", "sr-users/users.properties")
    assert "schema-registry/password" not in condition(cluster, "SchemaRegistryReady")["message"]
    url = f"https://locked-schema-registry.{namespace}.svc:8081"
    assert cluster["status"]["schemaRegistry"]["url"] == url

    properties = get(kube, "configmap", "locked-schema-registry-config", namespace)["data"][  # type: ignore[index]
        "schema-registry.properties"]
    for line in (f"kafkastore.bootstrap.servers=locked-bootstrap.{namespace}.svc:9094",
                 "kafkastore.security.protocol=SASL_SSL", "kafkastore.sasl.mechanism=SCRAM-SHA-512",
                 "kafkastore.ssl.truststore.location=/etc/riverlog-schema-registry-kafka/ca/ca.crt",
                 "listeners=https://0.0.0.0:8081",
                 "ssl.keystore.location=/etc/riverlog-schema-registry-tls/keystore.pem",
                 "authentication.method=BASIC", "authentication.roles=admin",
                 "authentication.users.file=/etc/riverlog-schema-registry-auth/users.properties"):
        assert line + "\n" in properties, (line, properties)
    password = base64.b64decode(get(kube, "secret", "schema-registry", namespace)["data"]["password"]).decode()  # type: ignore[index]
    assert password not in properties
    deployment = get(kube, "deployment", "locked-schema-registry", namespace)
    assert deployment is not None
    pod = template(deployment)
    (container,) = pod["spec"]["containers"]
    # The password: a file mounted from the User's Secret, named through the dir config provider.
    assert ('kafkastore.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="schema-registry" password="${dir:/etc/riverlog-schema-registry-kafka/user:password}";\n'
            ) in properties
    assert not any("jaas" in arg for arg in container["command"])
    assert container["readinessProbe"]["httpGet"] == {"path": "/metrics", "port": "https", "scheme": "HTTPS"}
    volumes = {v["name"]: v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v}
    assert volumes == {"kafka-ca": "locked-cluster-ca-cert", "tls": "locked-schema-registry-tls", "users": "sr-users",
                       "kafka-user": "schema-registry"}
    # The https certificate: issued from the Cluster CA for the Service's names, owned by the Cluster.
    tls = get(kube, "secret", "locked-schema-registry-tls", namespace)
    assert tls is not None and tls["metadata"]["ownerReferences"][0]["uid"] == cluster["metadata"]["uid"]
    keystore = base64.b64decode(tls["data"]["keystore.pem"])
    leaf = x509.load_pem_x509_certificate(keystore[keystore.index(b"-----BEGIN CERTIFICATE-----"):])
    assert f"locked-schema-registry.{namespace}.svc" in leaf.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    ca = base64.b64decode(get(kube, "secret", "locked-cluster-ca-cert", namespace)["data"]["ca.crt"])  # type: ignore[index]
    assert leaf.issuer == x509.load_pem_x509_certificate(ca).subject

    # The users file arrives: the instances are started with it (a new credentials version).
    first = pod["metadata"]["annotations"]["riverlog.dev/credentials-version"]
    kube.kubectl("create", "secret", "generic", "sr-users", "-n", namespace,
                 "--from-literal=users.properties=alice: alice-secret,admin")
    registry_condition(kube, "locked", namespace, "InstancesNotReady", f"0/1 instances ready at {url}")
    deployment = get(kube, "deployment", "locked-schema-registry", namespace)
    assert deployment is not None and template(deployment)["metadata"]["annotations"][
        "riverlog.dev/credentials-version"] != first

    # A plain listener beside it, but ACLs on: without a User the registry would be User:ANONYMOUS.
    apply(kube, cluster_doc(namespace, "acls", replicas=1, schemaRegistry={}, authorization={}, listeners=[
        {"name": "PLAIN", "port": 9092}]))
    registry_condition(kube, "acls", namespace, "KafkaAuthenticationNeeded", "User:ANONYMOUS")
    assert get(kube, "deployment", "acls-schema-registry", namespace) is None
    # The samples the docs point to are valid (in a namespace of their own: the User above has their name).
    samples = kube.namespace(f"{PREFIX}-samples")
    for sample in ("cluster-with-schema-registry.yaml", "secured-cluster-with-schema-registry.yaml"):
        kube.kubectl("apply", "--dry-run=server", "-n", samples, "-f", str(ROOT / "examples" / sample))
