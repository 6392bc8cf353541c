"""The operator against a real API server: CRDs, Cluster children, status, scaling, rolling
restarts, deletion, and Topics reconciled against a real Riverlog broker on loopback.

The operator runs as in production (``python -m riverlog_operator``, kopf, its own API client)
as a subprocess with the test cluster's kubeconfig. There is no kubelet: broker pods stay
Pending, so Cluster status says no broker is ready; Topic tests point a Cluster at a broker
process on loopback with the ``riverlog.dev/bootstrap-servers`` annotation.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from riverlog.client.admin import AdminClient
from support.brokers import BrokerProcess, free_port, free_ports
from support.kube import KubeCluster, wait_until

pytestmark = pytest.mark.k8s

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "crds"
WAIT = 90.0
# Test namespaces start with this; the operator of this module watches only those, so it never
# acts on other modules' resources in the same API server.
PREFIX = "op"


class OperatorProcess:
    def __init__(self, kube: KubeCluster, log_path: Path, *args: str, **env: str) -> None:
        self.metrics_port = free_port()
        self.log_path = log_path
        full_env = {
            **kube.env(),
            "PYTHONPATH": os.pathsep.join([str(ROOT / "operator"), str(ROOT / "broker_image")]),
            "RIVERLOG_OPERATOR_METRICS_PORT": str(self.metrics_port),
            "RIVERLOG_OPERATOR_METRICS_HOST": "127.0.0.1",
            "RIVERLOG_OPERATOR_RESYNC_SECONDS": "2",
            "RIVERLOG_OPERATOR_TOPIC_RESYNC_SECONDS": "2",
            "RIVERLOG_OPERATOR_RETRY_SECONDS": "2",
            "RIVERLOG_OPERATOR_IMAGE": "riverlog:test",
            **env,
        }
        with log_path.open("ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "riverlog_operator", *args], env=full_env,
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(self._metrics_up, 60, "the operator's /metrics endpoint")

    def _metrics_up(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"the operator exited with {self.proc.returncode}:\n{self.log()}")
        try:
            self.metrics()
            return True
        except OSError:
            return False

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as resp:
            text: str = resp.read().decode()
            return text

    def reconciles(self, kind: str) -> float:
        total = 0.0
        for line in self.metrics().splitlines():
            if line.startswith("riverlog_operator_reconciles_total{") and f'kind="{kind}"' in line:
                total += float(line.rsplit(" ", 1)[1])
        return total

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


@pytest.fixture(scope="module")
def crds(kube: KubeCluster) -> None:
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRDS))
    for name in ("clusters.riverlog.dev", "topics.riverlog.dev", "users.riverlog.dev", "connects.riverlog.dev",
                 "connectors.riverlog.dev", "mirrors.riverlog.dev", "clusterkopfpeerings.kopf.dev",
                 "kopfpeerings.kopf.dev"):
        kube.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")


@pytest.fixture(scope="module")
def operator(kube: KubeCluster, crds: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    log_path = tmp_path_factory.mktemp("operator") / "operator.log"
    proc = OperatorProcess(kube, log_path, "--standalone", "--namespace", f"{PREFIX}-*", "--verbose")
    yield proc
    proc.stop()


@pytest.fixture
def operator_log(operator: OperatorProcess) -> Iterator[OperatorProcess]:
    """The operator; what it logged during the test is printed at teardown (pytest shows it
    for failed tests)."""
    start = len(operator.log())
    yield operator
    print(f"--- operator log ---\n{operator.log()[start:][-8000:]}")


def get(kube: KubeCluster, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    args = ["get", kind, name, "-o", "json"] + (["-n", namespace] if namespace else [])
    proc = kube.kubectl(*args, check=False)
    if proc.returncode != 0:
        if "NotFound" in proc.stderr or "not found" in proc.stderr:
            return None
        raise AssertionError(proc.stderr)
    obj: dict[str, Any] = json.loads(proc.stdout)
    return obj


def apply(kube: KubeCluster, *docs: dict[str, Any], check: bool = True) -> subprocess.CompletedProcess[str]:
    text = "\n---\n".join(json.dumps(d) for d in docs)
    return kube.kubectl("apply", "-f", "-", input=text, check=check)


def cluster_doc(namespace: str, name: str = "demo", annotations: dict[str, str] | None = None,
                **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "riverlog.dev/v1alpha1", "kind": "Cluster", "metadata": meta, "spec": spec}


def topic_doc(namespace: str, name: str, cluster: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "riverlog.dev/v1alpha1", "kind": "Topic",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterRef": {"name": cluster}, **spec}}


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            found: dict[str, Any] = c
            return found
    return {}


def merge_patch(kube: KubeCluster, kind: str, name: str, namespace: str, patch: dict[str, Any]) -> None:
    kube.kubectl("patch", kind, name, "-n", namespace, "--type=merge", "-p", json.dumps(patch))


# --- CRDs ------------------------------------------------------------------------------------


def test_crds_default_and_reject_invalid_resources(kube: KubeCluster, crds: None) -> None:
    namespace = kube.namespace("crd-rules")  # not watched by the operator: the API alone decides

    def refused(doc: dict[str, Any], *needles: str) -> None:
        proc = apply(kube, doc, check=False)
        assert proc.returncode != 0, doc
        for needle in needles:
            assert needle in proc.stderr, proc.stderr

    defaulted = json.loads(kube.kubectl("apply", "--dry-run=server", "-o", "json", "-f", "-",
                                        input=json.dumps(cluster_doc(namespace))).stdout)
    assert defaulted["spec"] == {"replicas": 3, "storage": {"size": "10Gi", "deleteClaim": False},
                                 "listeners": [{"name": "PLAINTEXT", "port": 9092}], "metrics": {"enabled": True}}

    refused(cluster_doc(namespace, replicas=0), "spec.replicas")
    refused(cluster_doc(namespace, config={"node.id": "7"}), "config may not set properties the operator owns")
    for security in ("ssl.keystore.location", "sasl.enabled.mechanisms", "authorizer.class.name", "super.users"):
        refused(cluster_doc(namespace, config={security: "x"}), "config may not set TLS, SASL or authorization")
    refused(cluster_doc(namespace, listeners=[{"name": "A", "port": 9092}, {"name": "B", "port": 9092}]),
            "listener ports must be distinct")
    refused(cluster_doc(namespace, listeners=[{"name": "CONTROLLER", "port": 9095}]),
            "CONTROLLER is the quorum's listener")
    refused(cluster_doc(namespace, storage={"size": "lots"}), "spec.storage.size")

    # Storage is fixed once the StatefulSet's claims exist (a transition rule).
    apply(kube, cluster_doc(namespace, storage={"size": "1Gi"}))
    refused(cluster_doc(namespace, storage={"size": "2Gi"}), "storage.size cannot change")
    kube.kubectl("scale", "clusters.riverlog.dev/demo", "-n", namespace, "--replicas=5")
    assert get(kube, "clusters.riverlog.dev", "demo", namespace)["spec"]["replicas"] == 5  # type: ignore[index]

    topic = topic_doc(namespace, "orders", "demo", partitions=3)
    apply(kube, topic)
    stored = get(kube, "topics.riverlog.dev", "orders", namespace)
    assert stored is not None
    assert stored["spec"] == {"clusterRef": {"name": "demo"}, "partitions": 3, "replicationFactor": 3,
                              "deletionPolicy": "Delete"}
    refused({**topic, "spec": {**topic["spec"], "partitions": 2}}, "partitions can never decrease")
    refused({**topic, "spec": {**topic["spec"], "topicName": "renamed"}}, "topicName cannot be added")
    refused({**topic, "spec": {**topic["spec"], "clusterRef": {"name": "other"}}}, "clusterRef cannot change")
    refused(topic_doc(namespace, "zero-rf", "demo", replicationFactor=0), "spec.replicationFactor")
    refused(topic_doc(namespace, "bad-policy", "demo", deletionPolicy="Maybe"), "spec.deletionPolicy")
    refused(topic_doc(namespace, "bad-name", "demo", topicName="no spaces"), "spec.topicName")
    apply(kube, {**topic, "spec": {**topic["spec"], "partitions": 6}})  # growing is fine
    named = topic_doc(namespace, "named", "demo", topicName="Orders_v2")
    apply(kube, named)
    refused({**named, "spec": {**named["spec"], "topicName": "Orders_v3"}}, "topicName cannot change")

    columns = kube.kubectl("get", "rlt", "-n", namespace).stdout.splitlines()[0].split()
    assert columns == ["NAME", "CLUSTER", "TOPIC", "PARTITIONS", "RF", "STATUS", "REASON", "AGE"]
    columns = kube.kubectl("get", "rlc", "-n", namespace).stdout.splitlines()[0].split()
    assert columns == ["NAME", "DESIRED", "READY", "CONTROLLER", "URP", "STATUS", "REASON", "AGE"]


def test_crd_security_settings_are_checked(kube: KubeCluster, crds: None) -> None:
    """Listener TLS and authentication and the Cluster's authorization (issue #18): contradictory
    settings are refused by the API server with the CRD's CEL messages, valid ones kept whole."""
    namespace = kube.namespace("crd-security")  # not watched by the operator: the API alone decides

    def refused(doc: dict[str, Any], *needles: str) -> None:
        proc = apply(kube, doc, check=False)
        assert proc.returncode != 0, doc
        for needle in needles:
            assert needle in proc.stderr, proc.stderr

    def listener(**fields: Any) -> dict[str, Any]:
        return cluster_doc(namespace, listeners=[{"name": "SECURE", "port": 9094, **fields}])

    refused(listener(authentication={"type": "tls"}), "authentication type tls needs tls true")
    refused(listener(tls=True, authentication={"type": "oauth"}), "authentication type oauth needs jwksEndpointUri")
    refused(listener(authentication={"type": "scram-sha-512", "audience": "kafka"}),
            "belong to authentication type oauth")
    refused(listener(tls=True, authentication={"type": "kerberos"}), "spec.listeners[0].authentication.type",
            "Unsupported value")
    refused(cluster_doc(namespace, listeners=[{"name": "REPLICATION", "port": 9095}]),
            "REPLICATION is the brokers' own listener")
    refused(cluster_doc(namespace, listeners=[{"name": "A", "port": 9091}]), "ports 9091 (replication)")
    refused(cluster_doc(namespace, authorization={"superUsers": ["admin"]}), "spec.authorization.superUsers")

    secured = cluster_doc(namespace, listeners=[
        {"name": "PLAIN", "port": 9092},
        {"name": "SCRAM", "port": 9094, "tls": True, "authentication": {"type": "scram-sha-512"}},
        {"name": "MTLS", "port": 9095, "tls": True, "authentication": {"type": "tls"}},
        {"name": "OAUTH", "port": 9096, "tls": True, "authentication": {
            "type": "oauth", "jwksEndpointUri": "https://idp.example/jwks", "audience": "kafka"}},
    ], authorization={"superUsers": ["User:admin"]})
    stored = json.loads(kube.kubectl("apply", "--dry-run=server", "-o", "json", "-f", "-",
                                     input=json.dumps(secured)).stdout)
    assert stored["spec"]["listeners"] == secured["spec"]["listeners"]  # nothing pruned
    assert stored["spec"]["authorization"] == {"type": "simple", "superUsers": ["User:admin"]}
    for example in ("secured-cluster.yaml", "user.yaml"):  # the samples the README points to
        kube.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", str(ROOT / "examples" / example))


def user_doc(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "riverlog.dev/v1alpha1", "kind": "User", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterRef": {"name": "demo"}, "authentication": {"type": "scram-sha-512"}, **spec}}


def test_user_crd_defaults_and_refuses_what_kafka_would_not_take(kube: KubeCluster, crds: None) -> None:
    """The User resource (issue #18): ACL defaults as Strimzi's KafkaUser (literal pattern, any
    host, allow), unknown operations and misnamed resources refused with CEL messages."""
    namespace = kube.namespace("crd-users")

    def refused(doc: dict[str, Any], *needles: str) -> None:
        proc = apply(kube, doc, check=False)
        assert proc.returncode != 0, doc
        for needle in needles:
            assert needle in proc.stderr, proc.stderr

    acl = {"resource": {"type": "topic", "name": "orders"}, "operations": ["Read", "Describe"]}
    alice = user_doc(namespace, "alice", authorization={"acls": [acl]}, quotas={"producerByteRate": 5242880})
    stored = json.loads(kube.kubectl("apply", "--dry-run=server", "-o", "json", "-f", "-",
                                     input=json.dumps(alice)).stdout)
    assert stored["spec"]["authorization"] == {"type": "simple", "acls": [{
        "resource": {"type": "topic", "name": "orders", "patternType": "literal"},
        "operations": ["Read", "Describe"], "host": "*", "type": "allow"}]}

    def with_acl(**changes: Any) -> dict[str, Any]:
        return user_doc(namespace, "bob", authorization={"acls": [{**acl, **changes}]})

    refused(with_acl(operations=["Read", "Fly"]), "unknown ACL operation")
    refused(with_acl(resource={"type": "topic"}), "needs a name")
    refused(with_acl(resource={"type": "cluster", "name": "prod"}), "no name but kafka-cluster")
    refused(with_acl(resource={"type": "table", "name": "x"}), "Unsupported value")
    refused(with_acl(type="maybe"), "Unsupported value")
    refused(user_doc(namespace, "carol", authentication={"type": "oauth"}), "Unsupported value")
    refused(user_doc(namespace, "dave", quotas={"producerByteRate": 0}), "spec.quotas.producerByteRate")
    apply(kube, user_doc(namespace, "erin"))
    refused(user_doc(namespace, "erin", authentication={"type": "tls"}), "authentication.type cannot change")
    refused({**user_doc(namespace, "erin"), "spec": {**user_doc(namespace, "erin")["spec"],
                                                     "clusterRef": {"name": "other"}}}, "clusterRef cannot change")
    columns = kube.kubectl("get", "rlu", "-n", namespace).stdout.splitlines()[0].split()
    assert columns == ["NAME", "CLUSTER", "AUTHENTICATION", "SECRET", "STATUS", "REASON", "AGE"]


def test_connect_connector_and_mirror_crds_default_and_refuse(kube: KubeCluster, crds: None) -> None:
    """Issue #19's resources on the real API server: its CEL compiles (and fits the cost budget),
    defaults are the model's, contradictions are refused with the CRDs' messages, and the
    examples apply. tests/unit/test_operator_connect_crds.py tries many more cases in-process."""
    namespace = kube.namespace("crd-connect")  # not watched by the operator: the API alone decides

    def doc(kind: str, name: str, **spec: Any) -> dict[str, Any]:
        return {"apiVersion": "riverlog.dev/v1alpha1", "kind": kind, "metadata": {"name": name,
                                                                                   "namespace": namespace},
                "spec": spec}

    def refused(manifest: dict[str, Any], *needles: str) -> None:
        proc = apply(kube, manifest, check=False)
        assert proc.returncode != 0, manifest
        for needle in needles:
            assert needle in proc.stderr, proc.stderr

    def stored(manifest: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(kube.kubectl("apply", "--dry-run=server", "-o", "json", "-f", "-",
                                                      input=json.dumps(manifest)).stdout)
        return out

    assert stored(doc("Connect", "etl", clusterRef={"name": "secured"}))["spec"] == {
        "clusterRef": {"name": "secured"}, "replicas": 1, "exactlyOnceSource": False, "metrics": {"enabled": True}}
    refused(doc("Connect", "both", clusterRef={"name": "a"}, bootstrapServers="b:9092"), "give exactly one of")
    refused(doc("Connect", "owned", clusterRef={"name": "a"}, config={"plugin.path": "/x"}),
            "config may not set what the operator owns")
    refused(doc("Connect", "tls", clusterRef={"name": "a"}, config={"producer.ssl.keystore.location": "/x"}),
            "config may not set TLS or SASL properties")
    refused(doc("Connect", "auth", bootstrapServers="b:9092",
                authentication={"type": "scram-sha-512", "userRef": {"name": "u"}}), "userRef needs clusterRef")
    refused(doc("Connect", "plugin", clusterRef={"name": "a"},
                plugins=[{"name": "p", "volume": {"emptyDir": {}, "image": {"reference": "x"}}}]),
            "exactly one of configMap")
    apply(kube, doc("Connect", "etl", clusterRef={"name": "secured"}))
    kube.kubectl("scale", "connects.riverlog.dev/etl", "-n", namespace, "--replicas=2")
    assert get(kube, "connects.riverlog.dev", "etl", namespace)["spec"]["replicas"] == 2  # type: ignore[index]

    lines = doc("Connector", "lines", connectRef={"name": "etl"},
                **{"class": "org.apache.kafka.connect.file.FileStreamSourceConnector"})
    assert stored(lines)["spec"]["tasksMax"] == 1 and stored(lines)["spec"]["state"] == "running"
    refused(doc("Connector", "bad", connectRef={"name": "etl"}, config={"tasks.max": "2"}, **{"class": "X"}),
            "config may not set connector.class, tasks.max or name")
    apply(kube, lines)
    refused({**lines, "spec": {**lines["spec"], "connectRef": {"name": "other"}}}, "connectRef cannot change")

    source = {"alias": "a", "clusterRef": {"name": "x"}}
    mirror = doc("Mirror", "m", source=source, target={"alias": "b", "clusterRef": {"name": "y"}})
    assert stored(mirror)["spec"]["replicationPolicy"] == "default"
    refused(doc("Mirror", "same", source=source, target=source), "source and target need different aliases")
    refused(doc("Mirror", "cfg", source=source, target={"alias": "b", "clusterRef": {"name": "y"}},
                config={"target.cluster.sasl.jaas.config": "x"}), "config may not set TLS or SASL properties")
    apply(kube, mirror)
    refused({**mirror, "spec": {**mirror["spec"], "replicationPolicy": "identity"}}, "replicationPolicy cannot change")

    for example in ("connect.yaml", "mirror.yaml"):
        kube.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", str(ROOT / "examples" / example))
    columns = kube.kubectl("get", "rlcr", "-n", namespace).stdout.splitlines()[0].split()
    assert columns == ["NAME", "CONNECT", "CLASS", "STATE", "READY", "AGE"]
    columns = kube.kubectl("get", "rlmm", "-n", namespace).stdout.splitlines()[0].split()
    assert columns == ["NAME", "SOURCE", "TARGET", "DESIRED", "READY", "STATUS", "REASON", "AGE"]


# --- Cluster ---------------------------------------------------------------------------------


CHILDREN = [("serviceaccount", "demo-broker"), ("configmap", "demo-config"), ("service", "demo-brokers"),
            ("service", "demo-bootstrap"), ("statefulset", "demo"), ("poddisruptionbudget", "demo")]


def wait_children(kube: KubeCluster, namespace: str, name: str = "demo") -> dict[str, Any]:
    cluster = get(kube, "clusters.riverlog.dev", name, namespace)
    assert cluster is not None
    uid = cluster["metadata"]["uid"]

    def all_there() -> bool:
        for kind, child in CHILDREN:
            obj = get(kube, kind, child.replace("demo", name, 1), namespace)
            if obj is None:
                return False
            owners = obj["metadata"].get("ownerReferences") or []
            assert [(o["kind"], o["uid"], o.get("controller")) for o in owners] == [("Cluster", uid, True)]
        return True

    wait_until(all_there, WAIT, "the Cluster's ServiceAccount, ConfigMap, Services, StatefulSet and PDB")
    return cluster


def pods(kube: KubeCluster, namespace: str, name: str = "demo") -> list[dict[str, Any]]:
    out = kube.kubectl("get", "pods", "-n", namespace, "-l", f"app.kubernetes.io/instance={name}", "-o", "json")
    items: list[dict[str, Any]] = json.loads(out.stdout)["items"]
    return sorted(items, key=lambda p: p["metadata"]["name"])


def statefulset(kube: KubeCluster, namespace: str, name: str = "demo") -> dict[str, Any]:
    sts = get(kube, "statefulset", name, namespace)
    assert sts is not None
    return sts


def test_cluster_creates_its_children_and_reports_status(kube: KubeCluster, operator_log: OperatorProcess) -> None:
    namespace = kube.namespace(f"{PREFIX}-create")
    apply(kube, cluster_doc(namespace))
    wait_children(kube, namespace)

    sts = statefulset(kube, namespace)
    assert sts["spec"]["replicas"] == 3
    assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}
    pod_spec = sts["spec"]["template"]["spec"]
    assert pod_spec["containers"][0]["image"] == "riverlog:test"
    assert pod_spec["securityContext"]["runAsNonRoot"] is True
    assert pod_spec["containers"][0]["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics",
                                                                     "scheme": "HTTP"}
    headless = get(kube, "service", "demo-brokers", namespace)
    assert headless is not None and headless["spec"]["clusterIP"] == "None"
    config = get(kube, "configmap", "demo-config", namespace)
    assert config is not None
    assert "controller.quorum.voters=0@demo-0.demo-brokers." in config["data"]["server.properties"]
    pdb = get(kube, "poddisruptionbudget", "demo", namespace)
    assert pdb is not None and pdb["spec"]["maxUnavailable"] == 1

    # The controller-manager makes pods and volume claims from the StatefulSet (all at once:
    # Parallel pod management); without a kubelet they stay Pending.
    wait_until(lambda: [p["metadata"]["name"] for p in pods(kube, namespace)] == ["demo-0", "demo-1", "demo-2"],
               WAIT, "pods demo-0..2")
    for i in range(3):
        wait_until(lambda i=i: get(kube, "pvc", f"data-demo-{i}", namespace), WAIT, f"PVC data-demo-{i}")

    def status_settled() -> dict[str, Any] | None:
        obj = get(kube, "clusters.riverlog.dev", "demo", namespace)
        status = (obj or {}).get("status") or {}
        return obj if status.get("replicas") == 3 and status.get("observedGeneration") == 1 else None

    cluster = wait_until(status_settled, WAIT, "status with replicas 3 and observedGeneration 1")
    status = cluster["status"]
    assert status["readyBrokers"] == 0
    assert status["quorumVoters"] == 3
    assert status["bootstrapServers"] == f"demo-bootstrap.{namespace}.svc:9092"
    assert status["labelSelector"] == ("app.kubernetes.io/component=broker,app.kubernetes.io/instance=demo,"
                                       "app.kubernetes.io/name=riverlog")
    ready, reconciling, degraded = (condition(cluster, t) for t in ("Ready", "Reconciling", "Degraded"))
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "BrokersNotReady", "0/3 brokers ready")
    assert (reconciling["status"], reconciling["reason"]) == ("True", "WaitingForBrokers")
    assert degraded["status"] == "False"
    assert {c["observedGeneration"] for c in status["conditions"]} == {1}
    row = kube.kubectl("get", "rlc", "demo", "-n", namespace, "--no-headers").stdout.split()
    assert row[:3] == ["demo", "3", "0"] and "BrokersNotReady" in row

    metrics = operator_log.metrics()
    assert 'riverlog_operator_reconciles_total{kind="Cluster",result="ok"}' in metrics
    assert "riverlog_operator_reconcile_duration_seconds_bucket" in metrics


def secret_data(kube: KubeCluster, name: str, namespace: str) -> dict[str, bytes]:
    import base64

    obj = get(kube, "secret", name, namespace)
    return {k: base64.b64decode(v) for k, v in ((obj or {}).get("data") or {}).items()}


def test_a_secured_cluster_gets_its_certificate_authorities_and_renews_on_request(
        kube: KubeCluster, operator_log: OperatorProcess) -> None:
    """Issue #18: a Cluster with TLS and SCRAM listeners and authorization gets its cluster and
    clients CAs, a keystore per broker naming its DNS names, the operator's own keystore, the
    brokers configured to use them, the CAs' expiry in its status; the force-renew annotation
    makes a new cluster CA certificate for the same key whose bundle still trusts the old one,
    re-issues every broker, and is taken off again; force-replace makes a new clients CA key."""
    from cryptography import x509

    namespace = kube.namespace(f"{PREFIX}-secured")
    apply(kube, cluster_doc(namespace, listeners=[
        {"name": "PLAIN", "port": 9092},
        {"name": "SECURE", "port": 9094, "tls": True, "authentication": {"type": "scram-sha-512"}},
        {"name": "MTLS", "port": 9095, "tls": True, "authentication": {"type": "tls"}}],
        authorization={"superUsers": ["User:admin"]}))
    wait_children(kube, namespace)
    names = ("demo-cluster-ca", "demo-cluster-ca-cert", "demo-clients-ca", "demo-clients-ca-cert", "demo-brokers",
             "demo-operator")
    wait_until(lambda: all(get(kube, "secret", n, namespace) for n in names), WAIT, "the key material Secrets")
    cluster_ca = secret_data(kube, "demo-cluster-ca", namespace)
    assert set(cluster_ca) == {"ca.key", "ca.crt"}
    assert secret_data(kube, "demo-cluster-ca-cert", namespace) == {"ca.crt": cluster_ca["ca.crt"]}  # no key
    brokers = secret_data(kube, "demo-brokers", namespace)
    assert sorted(brokers) == ["demo-0.pem", "demo-1.pem", "demo-2.pem"]
    leaf = x509.load_pem_x509_certificate(brokers["demo-1.pem"])
    dns = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert f"demo-1.demo-brokers.{namespace}.svc" in dns and f"demo-bootstrap.{namespace}.svc" in dns
    for secret in names:
        owners = get(kube, "secret", secret, namespace)["metadata"]["ownerReferences"]  # type: ignore[index]
        assert [o["kind"] for o in owners] == ["Cluster"]  # deleted with the Cluster

    props = get(kube, "configmap", "demo-config", namespace)["data"]["server.properties"]  # type: ignore[index]
    for line in ("listener.security.protocol.map=PLAIN:PLAINTEXT,SECURE:SASL_SSL,MTLS:SSL,REPLICATION:SSL,"
                 "CONTROLLER:SSL", "inter.broker.listener.name=REPLICATION",
                 "super.users=User:riverlog-broker;User:riverlog-operator;User:admin"):
        assert line in props.splitlines(), props
    volumes = {v["name"]: v for v in statefulset(kube, namespace)["spec"]["template"]["spec"]["volumes"]}
    assert volumes["broker-certs"]["secret"]["secretName"] == "demo-brokers"

    def expiry() -> str | None:
        status = (get(kube, "clusters.riverlog.dev", "demo", namespace) or {}).get("status") or {}
        return ((status.get("certificateAuthorities") or {}).get("cluster") or {}).get("notAfter")

    first_expiry = wait_until(expiry, WAIT, "the cluster CA's expiry in the status")
    assert first_expiry == x509.load_pem_x509_certificate(cluster_ca["ca.crt"]).not_valid_after_utc.strftime(
        "%Y-%m-%dT%H:%M:%SZ")

    kube.kubectl("annotate", "clusters.riverlog.dev/demo", "-n", namespace, "riverlog.dev/force-renew-ca=cluster")
    wait_until(lambda: secret_data(kube, "demo-cluster-ca", namespace).get("ca.crt")
               not in (None, cluster_ca["ca.crt"]), WAIT, "a renewed cluster CA")
    renewed = secret_data(kube, "demo-cluster-ca", namespace)
    assert renewed["previous-ca.crt"] == cluster_ca["ca.crt"]
    assert renewed["ca.key"] == cluster_ca["ca.key"]  # a renewal, not a replacement
    wait_until(lambda: secret_data(kube, "demo-cluster-ca-cert", namespace)["ca.crt"].count(b"BEGIN CERTIFICATE") == 2,
               WAIT, "a bundle trusting both CAs")
    wait_until(lambda: all(v != brokers[k] for k, v in secret_data(kube, "demo-brokers", namespace).items()),
               WAIT, "every broker keystore issued again")
    wait_until(lambda: "riverlog.dev/force-renew-ca" not in (
        (get(kube, "clusters.riverlog.dev", "demo", namespace) or {})["metadata"].get("annotations") or {}),
        WAIT, "the annotation taken off")

    clients_ca = secret_data(kube, "demo-clients-ca", namespace)
    kube.kubectl("annotate", "clusters.riverlog.dev/demo", "-n", namespace, "riverlog.dev/force-replace-ca=clients")
    wait_until(lambda: secret_data(kube, "demo-clients-ca", namespace).get("ca.key")
               not in (None, clients_ca["ca.key"]), WAIT, "a replaced clients CA key")
    assert secret_data(kube, "demo-clients-ca", namespace)["previous-ca.crt"] == clients_ca["ca.crt"]
    assert secret_data(kube, "demo-cluster-ca", namespace)["ca.crt"] == renewed["ca.crt"]  # left alone
    wait_until(lambda: "riverlog.dev/force-replace-ca" not in (
        (get(kube, "clusters.riverlog.dev", "demo", namespace) or {})["metadata"].get("annotations") or {}),
        WAIT, "the replace annotation taken off")


def test_spec_change_patches_the_statefulset_and_rolls_pods(kube: KubeCluster,
                                                           operator_log: OperatorProcess) -> None:
    namespace = kube.namespace(f"{PREFIX}-roll")
    apply(kube, cluster_doc(namespace))
    wait_children(kube, namespace)
    wait_until(lambda: len(pods(kube, namespace)) == 3, WAIT, "three pods")
    # Fields of other managers survive the operator's applies.
    kube.kubectl("annotate", "statefulset", "demo", "-n", namespace, "example.com/owner=team-a")
    kube.kubectl("label", "service", "demo-bootstrap", "-n", namespace, "example.com/exposed=yes")
    old_revision = statefulset(kube, namespace)["status"]["updateRevision"]

    merge_patch(kube, "clusters.riverlog.dev", "demo", namespace,
                {"spec": {"image": "riverlog:next", "config": {"log.retention.ms": 60000}}})

    def patched() -> dict[str, Any] | None:
        sts = statefulset(kube, namespace)
        container = sts["spec"]["template"]["spec"]["containers"][0]
        return sts if container["image"] == "riverlog:next" else None

    sts = wait_until(patched, WAIT, "the StatefulSet with the new image")
    config = get(kube, "configmap", "demo-config", namespace)
    assert config is not None and "log.retention.ms=60000\n" in config["data"]["server.properties"]
    assert sts["metadata"]["annotations"]["example.com/owner"] == "team-a"
    bootstrap = get(kube, "service", "demo-bootstrap", namespace)
    assert bootstrap is not None and bootstrap["metadata"]["labels"]["example.com/exposed"] == "yes"

    # OnDelete: the operator deletes the (not ready) pods one by one and the StatefulSet
    # controller recreates each from the new template.
    def rolled() -> bool:
        revision = statefulset(kube, namespace)["status"].get("updateRevision")
        current = pods(kube, namespace)
        return (revision != old_revision and len(current) == 3
                and all(p["metadata"]["labels"]["controller-revision-hash"] == revision for p in current))

    wait_until(rolled, WAIT, "every pod on the new revision")
    assert all(p["spec"]["containers"][0]["image"] == "riverlog:next" for p in pods(kube, namespace))
    assert "restarting demo-" in operator_log.log()
    cluster = wait_until(lambda: (c := get(kube, "clusters.riverlog.dev", "demo", namespace))
                         and c["status"].get("observedGeneration") == 2 and c, WAIT, "observedGeneration 2")
    assert {c["observedGeneration"] for c in cluster["status"]["conditions"]} == {2}


def test_kubectl_scale_and_blocked_scale_down(kube: KubeCluster, operator_log: OperatorProcess) -> None:
    namespace = kube.namespace(f"{PREFIX}-scale")
    apply(kube, cluster_doc(namespace))
    wait_children(kube, namespace)

    kube.kubectl("scale", "rlc/demo", "-n", namespace, "--replicas=4")
    wait_until(lambda: statefulset(kube, namespace)["spec"]["replicas"] == 4, WAIT, "StatefulSet at 4 replicas")
    wait_until(lambda: get(kube, "pod", "demo-3", namespace), WAIT, "pod demo-3")
    wait_until(lambda: get(kube, "pvc", "data-demo-3", namespace), WAIT, "PVC data-demo-3")
    scale = json.loads(kube.kubectl("get", "--raw", f"/apis/riverlog.dev/v1alpha1/namespaces/{namespace}"
                                    "/clusters/demo/scale").stdout)
    assert scale["spec"]["replicas"] == 4
    wait_until(lambda: (get(kube, "rlc", "demo", namespace) or {}).get("status", {}).get("replicas") == 4, WAIT,
               "status.replicas 4")
    voters = get(kube, "configmap", "demo-config", namespace)
    assert voters is not None and "3@demo-3" not in voters["data"]["server.properties"]  # voters stay 0..2

    # Removing broker 3 needs its replicas moved first, and no broker answers here: refused
    # with a condition, the StatefulSet keeps its size.
    kube.kubectl("scale", "rlc/demo", "-n", namespace, "--replicas=3")

    def blocked(needle: str) -> Any:
        degraded = condition(get(kube, "rlc", "demo", namespace), "Degraded")
        return degraded if degraded.get("reason") == "ScaleDownBlocked" and needle in degraded["message"] else None

    degraded = wait_until(lambda: blocked("cannot drain brokers [3]"), WAIT, "ScaleDownBlocked")
    assert degraded["status"] == "True"
    assert statefulset(kube, namespace)["spec"]["replicas"] == 4
    # Below the quorum's voters is refused outright.
    kube.kubectl("scale", "rlc/demo", "-n", namespace, "--replicas=2")
    wait_until(lambda: blocked("fewer than the 3 metadata quorum voters"), WAIT, "ScaleDownBlocked for voters")
    assert statefulset(kube, namespace)["spec"]["replicas"] == 4


def test_pause_and_manual_rolling_update(kube: KubeCluster, operator_log: OperatorProcess) -> None:
    namespace = kube.namespace(f"{PREFIX}-pause")
    apply(kube, cluster_doc(namespace, replicas=1))
    wait_children(kube, namespace)

    kube.kubectl("annotate", "rlc", "demo", "-n", namespace, "riverlog.dev/pause-reconciliation=true")
    wait_until(lambda: condition(get(kube, "rlc", "demo", namespace), "Reconciling").get("reason")
               == "ReconciliationPaused", WAIT, "Reconciling=False ReconciliationPaused")
    merge_patch(kube, "rlc", "demo", namespace, {"spec": {"image": "riverlog:paused"}})
    # Let the operator look at it a few times (its own reconcile counter is the clock).
    seen = operator_log.reconciles("Cluster")
    wait_until(lambda: operator_log.reconciles("Cluster") >= seen + 3, WAIT, "three more reconciles")
    assert statefulset(kube, namespace)["spec"]["template"]["spec"]["containers"][0]["image"] == "riverlog:test"

    kube.kubectl("annotate", "rlc", "demo", "-n", namespace, "riverlog.dev/pause-reconciliation-")
    wait_until(lambda: statefulset(kube, namespace)["spec"]["template"]["spec"]["containers"][0]["image"]
               == "riverlog:paused", WAIT, "the image applied after unpausing")

    kube.kubectl("annotate", "rlc", "demo", "-n", namespace, "riverlog.dev/manual-rolling-update=true")

    def restarted() -> str | None:
        cluster = get(kube, "rlc", "demo", namespace) or {}
        token = (cluster.get("status") or {}).get("restartToken")
        annotations = cluster.get("metadata", {}).get("annotations") or {}
        template = statefulset(kube, namespace)["spec"]["template"]["metadata"]["annotations"]
        if token and "riverlog.dev/manual-rolling-update" not in annotations \
                and template.get("riverlog.dev/restart-token") == token:
            return str(token)
        return None

    wait_until(restarted, WAIT, "restart token in status and pod template, annotation removed")
    wait_until(lambda: all(p["metadata"]["labels"]["controller-revision-hash"]
                           == statefulset(kube, namespace)["status"].get("updateRevision")
                           for p in pods(kube, namespace)) and len(pods(kube, namespace)) == 1,
               WAIT, "the pod restarted on the new revision")


def test_rack_label_is_copied_to_scheduled_pods(kube: KubeCluster, operator_log: OperatorProcess) -> None:
    namespace = kube.namespace(f"{PREFIX}-rack")
    node = f"node-{namespace}"
    kube.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node, "labels": {"topology.kubernetes.io/zone": "zone-b"}}}))
    try:
        apply(kube, cluster_doc(namespace, replicas=1, rack={"topologyKey": "topology.kubernetes.io/zone"}))
        wait_children(kube, namespace)
        sts = statefulset(kube, namespace)
        assert sts["spec"]["template"]["spec"]["topologySpreadConstraints"][0]["topologyKey"] == \
            "topology.kubernetes.io/zone"
        wait_until(lambda: get(kube, "pod", "demo-0", namespace), WAIT, "pod demo-0")
        # No scheduler here: bind the pod to the node the way the scheduler would.
        kube.kubectl("create", "-f", "-", input=json.dumps({
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "demo-0", "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}))
        wait_until(lambda: ((get(kube, "pod", "demo-0", namespace) or {}).get("metadata", {}).get("annotations")
                            or {}).get("riverlog.dev/rack") == "zone-b", WAIT, "riverlog.dev/rack=zone-b on demo-0")
    finally:
        kube.kubectl("delete", "node", node, "--wait=false", check=False)


def test_deletion_cascades(kube: KubeCluster, operator_log: OperatorProcess) -> None:
    namespace = kube.namespace(f"{PREFIX}-delete")
    apply(kube, cluster_doc(namespace, storage={"deleteClaim": True}))
    wait_children(kube, namespace)
    wait_until(lambda: all(get(kube, "pvc", f"data-demo-{i}", namespace) for i in range(3)), WAIT, "PVCs")

    kube.kubectl("delete", "rlc", "demo", "-n", namespace, "--timeout=90s")

    def everything_gone() -> bool:
        children = [get(kube, kind, name, namespace) for kind, name in CHILDREN]
        claims = [get(kube, "pvc", f"data-demo-{i}", namespace) for i in range(3)]
        return not any(children) and not any(claims) and not pods(kube, namespace)

    wait_until(everything_gone, WAIT, "children, pods and claims deleted with the Cluster")


# --- Topic against a real broker -------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("topic-broker"), target="riverlog")
    proc.start()
    yield proc
    proc.close()


def admin_call(bootstrap: str, call: Any) -> Any:
    async def run() -> Any:
        async with AdminClient(bootstrap) as admin:
            return await call(admin)

    return asyncio.run(run())


def topic_status(kube: KubeCluster, namespace: str, name: str) -> dict[str, Any]:
    obj = get(kube, "rlt", name, namespace) or {}
    return obj


def wait_topic(kube: KubeCluster, namespace: str, name: str, reason: str, needle: str = "",
               generation: int | None = None) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        obj = topic_status(kube, namespace, name)
        ready = condition(obj, "Ready")
        if ready.get("reason") != reason or needle not in ready.get("message", ""):
            return None
        if generation is not None and obj["status"].get("observedGeneration") != generation:
            return None
        return obj

    found: dict[str, Any] = wait_until(check, WAIT, f"Topic {name}: {reason} {needle!r}")
    return found


def real_cluster(kube: KubeCluster, broker: BrokerProcess, prefix: str) -> str:
    namespace = kube.namespace(f"{PREFIX}-{prefix}")
    apply(kube, cluster_doc(namespace, name="real", replicas=1,
                            annotations={"riverlog.dev/bootstrap-servers": broker.bootstrap}))
    return namespace


def configs(bootstrap: str, topic: str) -> dict[str, str | None]:
    entries = admin_call(bootstrap, lambda a: a.describe_configs(topic))
    return {e.name: e.value for e in entries if e.is_topic_override}


def test_topic_create_grow_configure_drift_and_delete(kube: KubeCluster, operator_log: OperatorProcess,
                                                      broker: BrokerProcess) -> None:
    namespace = real_cluster(kube, broker, "topics")
    # The Cluster's status comes from the broker itself.
    cluster = wait_until(lambda: (c := get(kube, "rlc", "real", namespace)) and
                         c.get("status", {}).get("activeController") is not None and c, WAIT,
                         "the broker's controller in the Cluster's status")
    assert cluster["status"]["activeController"] == broker.node_id
    assert cluster["status"]["underReplicatedPartitions"] == 0

    apply(kube, topic_doc(namespace, "orders", "real", partitions=2, replicationFactor=1,
                          config={"retention.ms": 3600000, "cleanup.policy": "delete"}))
    obj = wait_topic(kube, namespace, "orders", "TopicReady")
    described = admin_call(broker.bootstrap, lambda a: a.describe_topics(["orders"]))[0]
    assert obj["status"]["topicId"] == str(described.topic_id)
    assert obj["status"]["partitions"] == 2 == len(described.partitions)
    assert obj["status"]["replicationFactor"] == 1
    assert configs(broker.bootstrap, "orders") == {"retention.ms": "3600000", "cleanup.policy": "delete"}
    assert "orders" in admin_call(broker.bootstrap, lambda a: a.describe_topics(["orders"]))[0].name

    # Grow partitions, change one config, drop another.
    merge_patch(kube, "rlt", "orders", namespace,
                {"spec": {"partitions": 4, "config": {"retention.ms": "7200000", "cleanup.policy": None}}})
    obj = wait_topic(kube, namespace, "orders", "TopicReady", generation=2)
    assert obj["status"]["partitions"] == 4
    assert len(admin_call(broker.bootstrap, lambda a: a.describe_topics(["orders"]))[0].partitions) == 4
    assert configs(broker.bootstrap, "orders") == {"retention.ms": "7200000"}

    # Drift: a config changed with Kafka's tools is put back, and the status says so.
    admin_call(broker.bootstrap, lambda a: a.alter_configs("orders", set={"retention.ms": "1000",
                                                                          "segment.ms": "60000"}))
    def reverted() -> str | None:
        drift = topic_status(kube, namespace, "orders").get("status", {}).get("lastDrift") or ""
        return drift if "retention.ms, segment.ms" in drift else None

    drift = wait_until(reverted, WAIT, "the drift correction in status.lastDrift")
    assert "reverted configs changed outside the operator" in drift
    assert configs(broker.bootstrap, "orders") == {"retention.ms": "7200000"}
    # Partitions added behind the operator's back cannot be removed: a condition, not a loop.
    admin_call(broker.bootstrap, lambda a: a.create_partitions("orders", 6))
    wait_topic(kube, namespace, "orders", "DriftDetected", "6 partitions, more than the 4 in the spec")
    merge_patch(kube, "rlt", "orders", namespace, {"spec": {"partitions": 6}})
    wait_topic(kube, namespace, "orders", "TopicReady", generation=3)

    # Delete: the finalizer deletes the Kafka topic first.
    kube.kubectl("delete", "rlt", "orders", "-n", namespace, "--timeout=60s")
    names = [t.name for t in admin_call(broker.bootstrap, lambda a: a.list_topics())]
    assert "orders" not in names


def test_topic_errors_show_in_status_and_retain_keeps_the_topic(kube: KubeCluster, operator_log: OperatorProcess,
                                                                broker: BrokerProcess) -> None:
    namespace = real_cluster(kube, broker, "topic-errors")
    # More replicas than brokers: a clear condition, fixed by fixing the spec.
    apply(kube, topic_doc(namespace, "wide", "real", partitions=1, replicationFactor=3))
    obj = wait_topic(kube, namespace, "wide", "InvalidSpec", "INVALID_REPLICATION_FACTOR")
    assert "replication factor 3 is larger than the 1 brokers" in condition(obj, "Ready")["message"]
    assert "wide" not in [t.name for t in admin_call(broker.bootstrap, lambda a: a.list_topics())]
    merge_patch(kube, "rlt", "wide", namespace, {"spec": {"replicationFactor": 1}})
    wait_topic(kube, namespace, "wide", "TopicReady", generation=2)

    # An invalid config value is the broker's refusal, shown as is.
    apply(kube, topic_doc(namespace, "badconf", "real", replicationFactor=1, config={"cleanup.policy": "sometimes"}))
    wait_topic(kube, namespace, "badconf", "InvalidSpec", "INVALID_CONFIG")

    # A Topic of a Cluster that does not exist.
    apply(kube, topic_doc(namespace, "orphan", "nowhere", replicationFactor=1))
    wait_topic(kube, namespace, "orphan", "ClusterNotFound", "no Cluster 'nowhere'")

    # deletionPolicy Retain: the resource goes, the Kafka topic stays.
    apply(kube, topic_doc(namespace, "kept", "real", replicationFactor=1, deletionPolicy="Retain",
                          topicName="kept.events"))
    wait_topic(kube, namespace, "kept", "TopicReady")
    kube.kubectl("delete", "rlt", "kept", "-n", namespace, "--timeout=60s")
    assert "kept.events" in [t.name for t in admin_call(broker.bootstrap, lambda a: a.list_topics())]


# --- peering ---------------------------------------------------------------------------------


def test_peering_lets_only_the_highest_priority_replica_act(kube: KubeCluster, crds: None,
                                                           tmp_path: Path) -> None:
    # Namespaced peering (the module's operator does not watch this namespace).
    namespace = kube.namespace("peering")
    kube.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "kopf.dev/v1", "kind": "KopfPeering",
        "metadata": {"name": "riverlog-operator", "namespace": namespace}}))
    low = OperatorProcess(kube, tmp_path / "low.log", "--namespace", namespace, RIVERLOG_OPERATOR_PRIORITY="10")
    high = None
    try:
        apply(kube, cluster_doc(namespace, name="first", replicas=1))
        wait_children(kube, namespace, "first")
        high = OperatorProcess(kube, tmp_path / "high.log", "--namespace", namespace,
                               RIVERLOG_OPERATOR_PRIORITY="20")
        wait_until(lambda: "Pausing operations in favour of" in low.log(), WAIT, "the low-priority replica pausing")
        peering = get(kube, "kopfpeering", "riverlog-operator", namespace)
        assert peering is not None
        assert sorted(p["priority"] for p in peering["status"].values()) == [10, 20]
        # Only the high-priority replica reconciles a new Cluster.
        low_before = low.reconciles("Cluster")
        apply(kube, cluster_doc(namespace, name="second", replicas=1))
        wait_children(kube, namespace, "second")
        assert high.reconciles("Cluster") >= 1
        assert low.reconciles("Cluster") == low_before
        # When it goes, the other one takes over.
        high.stop()
        wait_until(lambda: "Resuming operations" in low.log(), WAIT, "the low-priority replica resuming")
        apply(kube, cluster_doc(namespace, name="third", replicas=1))
        wait_children(kube, namespace, "third")
    finally:
        if high is not None:
            high.stop()
        low.stop()


# --- scale-down drain against a real quorum ------------------------------------------------------


@pytest.fixture
def quorum_of_four(tmp_path: Path) -> Iterator[str]:
    """Four Riverlog broker processes on loopback numbered like a Cluster's pods (node ids
    0-3, voters 0-2): what the operator drains when a Cluster shrinks from 4 to 3."""
    picked = free_ports(11)
    ports, controller_ports, metrics_ports = picked[:4], picked[4:7], picked[7:]
    voters = ",".join(f"{i}@127.0.0.1:{controller_ports[i]}" for i in range(3))
    procs = []
    env = {**os.environ, "PYTHONPATH": str(ROOT / "broker_image")}
    for i in range(4):
        listeners = f"PLAINTEXT://127.0.0.1:{ports[i]}"
        roles = "broker"
        if i < 3:
            listeners += f",CONTROLLER://127.0.0.1:{controller_ports[i]}"
            roles = "broker,controller"
        props = {"node.id": i, "process.roles": roles, "listeners": listeners,
                 "advertised.listeners": f"PLAINTEXT://127.0.0.1:{ports[i]}", "controller.quorum.voters": voters,
                 "log.dirs": tmp_path / f"broker{i}", "metrics.port": metrics_ports[i], "metrics.host": "127.0.0.1",
                 "auto.leader.rebalance.enable": "false"}
        args = [arg for k, v in props.items() for arg in ("--set", f"{k}={v}")]
        with (tmp_path / f"broker{i}.log").open("wb") as log:
            procs.append(subprocess.Popen([sys.executable, "-m", "riverlog", "broker", *args], env=env, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True))
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports)

    def all_registered() -> bool:
        try:
            described = admin_call(bootstrap, lambda a: a.describe_cluster())
        except Exception:
            return False
        return sorted(b.node_id for b in described.brokers) == [0, 1, 2, 3]

    try:
        wait_until(all_registered, WAIT, "four brokers registered with the quorum", interval=1.0)
        yield bootstrap
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def test_scale_down_drains_the_removed_broker_first(kube: KubeCluster, operator_log: OperatorProcess,
                                                    quorum_of_four: str) -> None:
    bootstrap = quorum_of_four
    namespace = kube.namespace(f"{PREFIX}-drain")
    apply(kube, cluster_doc(namespace, replicas=4, annotations={"riverlog.dev/bootstrap-servers": bootstrap}))
    wait_children(kube, namespace)
    apply(kube, topic_doc(namespace, "spread", "demo", partitions=8, replicationFactor=2))
    wait_topic(kube, namespace, "spread", "TopicReady")

    def replicas_on(node: int) -> list[tuple[int, tuple[int, ...]]]:
        topic = admin_call(bootstrap, lambda a: a.describe_topics(["spread"]))[0]
        return [(p.partition, p.replicas) for p in topic.partitions if node in p.replicas]

    assert replicas_on(3), "placement put no replica on broker 3; the test would prove nothing"
    kube.kubectl("scale", "rlc/demo", "-n", namespace, "--replicas=3")
    wait_until(lambda: statefulset(kube, namespace)["spec"]["replicas"] == 3, WAIT,
               "the StatefulSet shrunk after the drain")
    assert replicas_on(3) == []
    topic = admin_call(bootstrap, lambda a: a.describe_topics(["spread"]))[0]
    assert all(len(p.replicas) == 2 and set(p.replicas) <= {0, 1, 2} for p in topic.partitions)
    assert admin_call(bootstrap, lambda a: a.list_partition_reassignments()) == {}

    # A replication factor change is a reassignment too: 2 -> 3 over the remaining brokers.
    merge_patch(kube, "rlt", "spread", namespace, {"spec": {"replicationFactor": 3}})

    def widened() -> bool:
        parts = admin_call(bootstrap, lambda a: a.describe_topics(["spread"]))[0].partitions
        return all(sorted(p.replicas) == [0, 1, 2] and sorted(p.isr) == [0, 1, 2] for p in parts)

    # Broker 3 still runs (it is not a pod here) but left the Cluster: it gets no new replicas.
    wait_until(widened, WAIT, "every partition on brokers 0, 1 and 2 and in sync")
    obj = wait_until(lambda: (t := topic_status(kube, namespace, "spread")).get("status", {}).get(
        "replicationFactor") == 3 and condition(t, "Ready").get("status") == "True" and t, WAIT,
        "the Topic's status at replication factor 3")
    assert obj["status"]["observedGeneration"] == 2


def test_rolling_restart_waits_for_answering_brokers_without_under_replication(
        kube: KubeCluster, operator_log: OperatorProcess, broker: BrokerProcess) -> None:
    namespace = kube.namespace(f"{PREFIX}-gate")
    apply(kube, cluster_doc(namespace, replicas=1))
    wait_children(kube, namespace)
    wait_until(lambda: get(kube, "pod", "demo-0", namespace), WAIT, "pod demo-0")
    kube.mark_pod_ready(namespace, "demo-0")
    wait_until(lambda: statefulset(kube, namespace).get("status", {}).get("readyReplicas") == 1, WAIT,
               "the StatefulSet counting demo-0 ready")
    pod = get(kube, "pod", "demo-0", namespace)
    assert pod is not None
    uid = pod["metadata"]["uid"]

    # A ready pod whose broker cannot be asked about under-replicated partitions is not
    # restarted: the operator says why and waits.
    merge_patch(kube, "rlc", "demo", namespace, {"spec": {"config": {"log.retention.ms": 120000}}})

    def waiting() -> dict[str, Any] | None:
        cluster = get(kube, "rlc", "demo", namespace)
        reconciling = condition(cluster, "Reconciling")
        if reconciling.get("reason") == "RollingRestart" and "zero under-replicated" in reconciling["message"]:
            return cluster
        return None

    cluster = wait_until(waiting, WAIT, "RollingRestart waiting for zero under-replicated partitions")
    assert condition(cluster, "Degraded")["reason"] == "BrokersUnreachable"
    pod = get(kube, "pod", "demo-0", namespace)
    assert pod is not None and pod["metadata"]["uid"] == uid

    # Once the broker answers with zero under-replicated partitions, the restart goes ahead.
    kube.kubectl("annotate", "rlc", "demo", "-n", namespace, f"riverlog.dev/bootstrap-servers={broker.bootstrap}")

    def restarted() -> bool:
        current = get(kube, "pod", "demo-0", namespace)
        revision = statefulset(kube, namespace)["status"].get("updateRevision")
        return current is not None and current["metadata"]["uid"] != uid and \
            current["metadata"]["labels"]["controller-revision-hash"] == revision

    wait_until(restarted, WAIT, "demo-0 recreated on the new revision")


# --- Users (issue #18) -----------------------------------------------------------------------


def test_users_get_credentials_acls_and_quotas_and_lose_them_when_deleted(
        kube: KubeCluster, operator_log: OperatorProcess, tmp_path: Path) -> None:
    """A secured Cluster pointed at a real Riverlog broker on loopback whose REPLICATION-like
    listener trusts the Cluster's own CA (the operator's admin calls use its certificate there)
    and whose SASL_SSL and mutual-TLS listeners serve clients with certificates of that CA. A User
    with ACLs gets its Secret and produces and consumes with it; one without ACLs is denied; a TLS
    User logs in with the certificate in its Secret; quotas reach the cluster; deleting a User
    revokes its access and its ACLs."""
    import datetime

    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
    from riverlog.client.quotas import describe_user_quotas
    from riverlog_operator.builders import config as config_builder
    from riverlog_operator.certificates import Issued, issue

    namespace = kube.namespace(f"{PREFIX}-users")
    broker = BrokerProcess(tmp_path / "broker", target="riverlog")
    repl = broker.add_listener("REPL", "SSL", advertised_host="localhost")
    secure = broker.add_listener("SECURE", "SASL_SSL", advertised_host="localhost")
    mtls = broker.add_listener("MTLS", "SSL", advertised_host="localhost")
    apply(kube, cluster_doc(namespace, annotations={"riverlog.dev/bootstrap-servers": f"localhost:{repl}"},
                            replicas=1, listeners=[{"name": "PLAIN", "port": 9092},
                                                   {"name": "SECURE", "port": 9094, "tls": True,
                                                    "authentication": {"type": "scram-sha-512"}}],
                            authorization={"superUsers": ["User:ANONYMOUS"]}))
    wait_until(lambda: get(kube, "secret", "demo-clients-ca", namespace) and get(kube, "secret", "demo-operator",
                                                                                   namespace), WAIT, "the CAs")
    cluster_ca = secret_data(kube, "demo-cluster-ca", namespace)
    clients_ca = secret_data(kube, "demo-clients-ca", namespace)
    now_ = datetime.datetime.now(datetime.UTC)
    keystore = tmp_path / "broker.pem"
    ca = Issued(cluster_ca["ca.key"], cluster_ca["ca.crt"])
    keystore.write_bytes(issue(ca, "broker-0", config_builder.BROKER_UNIT, now_, datetime.timedelta(days=2),
                               dns_names=("localhost",), server=True).keystore_pem)
    (tmp_path / "cluster-ca.pem").write_bytes(cluster_ca["ca.crt"])
    (tmp_path / "clients-ca.pem").write_bytes(clients_ca["ca.crt"])
    broker.overrides.update({
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
        "listener.name.repl.ssl.client.auth": "required",
        "listener.name.repl.ssl.truststore.location": str(tmp_path / "cluster-ca.pem"),
        "listener.name.repl.ssl.principal.mapping.rules": config_builder.INTERNAL_MAPPING_RULES,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.location": str(tmp_path / "clients-ca.pem"),
        "listener.name.mtls.ssl.principal.mapping.rules": config_builder.CLIENT_MAPPING_RULES,
        "listener.name.secure.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.secure.scram-sha-512.sasl.jaas.config": config_builder.SCRAM_LOGIN,
        "authorizer.class.name": config_builder.STANDARD_AUTHORIZER,
        # The harness's PLAINTEXT listener (and the single node's controller) are ANONYMOUS.
        "super.users": "User:riverlog-broker;User:riverlog-operator;User:ANONYMOUS",
    })
    broker.start()
    try:
        admin_conf = {"bootstrap.servers": broker.bootstrap}
        from confluent_kafka.admin import AdminClient as KafkaAdmin
        from confluent_kafka.admin import NewTopic

        kafka_admin = KafkaAdmin(admin_conf)
        kafka_admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(30)

        acls = {"acls": [{"resource": {"type": "topic", "name": "orders"}, "operations": ["Write", "Read", "Describe"]},
                         {"resource": {"type": "group", "name": "readers-", "patternType": "prefix"},
                          "operations": ["Read"]}]}
        apply(kube, user_doc(namespace, "alice", authorization=acls, quotas={"producerByteRate": 1048576}),
              user_doc(namespace, "bob"),
              user_doc(namespace, "dave", authentication={"type": "tls"}, authorization=acls))

        def ready(user: str) -> bool:
            return condition(get(kube, "users.riverlog.dev", user, namespace), "Ready").get("status") == "True"

        for user in ("alice", "bob", "dave"):
            wait_until(lambda user=user: ready(user), WAIT, f"User {user} ready")
        password = secret_data(kube, "alice", namespace)["password"].decode()
        ca_bundle = tmp_path / "bundle.pem"
        ca_bundle.write_bytes(secret_data(kube, "demo-cluster-ca-cert", namespace)["ca.crt"])

        def sasl(user: str, secret: str) -> dict[str, Any]:
            return {"bootstrap.servers": f"localhost:{secure}", "security.protocol": "sasl_ssl",
                    "ssl.ca.location": str(ca_bundle), "sasl.mechanism": "SCRAM-SHA-512",
                    "sasl.username": user, "sasl.password": secret}

        def produce(conf: dict[str, Any], value: bytes) -> object:
            results: list[object] = []
            producer = Producer({**conf, "message.timeout.ms": 10000, "error_cb": results.append})
            producer.produce("orders", value, on_delivery=lambda err, _m: results.append(err))
            producer.flush(20)
            return results[-1] if results else "no answer"

        assert produce(sasl("alice", password), b"from-alice") is None
        consumer = Consumer({**sasl("alice", password), "group.id": "readers-1", "enable.auto.commit": False})
        consumer.assign([TopicPartition("orders", 0, 0)])
        msg = None
        for _ in range(40):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                break
        consumer.close()
        assert msg is not None and msg.error() is None and msg.value() == b"from-alice"

        denied = produce(sasl("bob", secret_data(kube, "bob", namespace)["password"].decode()), b"from-bob")
        assert isinstance(denied, KafkaError) and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, denied

        dave = secret_data(kube, "dave", namespace)
        (tmp_path / "dave.crt").write_bytes(dave["user.crt"])
        (tmp_path / "dave.key").write_bytes(dave["user.key"])
        tls_conf = {"bootstrap.servers": f"localhost:{mtls}", "security.protocol": "ssl",
                    "ssl.ca.location": str(ca_bundle), "ssl.certificate.location": str(tmp_path / "dave.crt"),
                    "ssl.key.location": str(tmp_path / "dave.key")}
        assert produce(tls_conf, b"from-dave") is None

        async def alice_quotas() -> dict[str, float]:
            from riverlog.client.admin import AdminClient as RiverlogAdmin

            async with RiverlogAdmin(broker.bootstrap) as admin:
                return await describe_user_quotas(admin, "alice")

        assert asyncio.run(alice_quotas()) == {"producer_byte_rate": 1048576.0}

        kube.kubectl("delete", "users.riverlog.dev", "alice", "-n", namespace)
        wait_until(lambda: get(kube, "users.riverlog.dev", "alice", namespace) is None, WAIT, "alice removed")
        wait_until(lambda: produce(sasl("alice", password), b"after") is not None, WAIT, "alice's access revoked")
        assert asyncio.run(alice_quotas()) == {}
        from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType
        from confluent_kafka.admin import ResourceType as KafkaResourceType

        left = kafka_admin.describe_acls(AclBindingFilter(
            KafkaResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None, AclOperation.ANY,
            AclPermissionType.ANY)).result(30)
        assert left == []
    finally:
        broker.close()
